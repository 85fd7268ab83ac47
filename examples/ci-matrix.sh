#!/usr/bin/env bash
# examples/github-actions.yml, played on one machine against the embedded fake EC2: its
# plan job (the action's plan step, then swarm shards), its shard jobs (the action's
# step, action/run.sh, with the same inputs and rails) one after the other, and its
# merge job's gates. Needs swarm with its sandbox extra (`pip install '.[sandbox]'` from
# this repository).
set -euo pipefail
command -v swarm >/dev/null || { echo "swarm is not on PATH (activate its venv: . .venv/bin/activate)" >&2; exit 127; }
work=$(mktemp -d)
trap 'kill "$sandbox_pid" 2>/dev/null || true; wait "$sandbox_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
step="$(cd "$(dirname "$0")/.." && pwd)/action/run.sh"

# Three regions in each of two accounts, each reached through a role.
swarm sandbox --port 0 --count 40 --regions 3 --accounts 2 \
  --ids-out "$work/ids.csv" --accounts-out "$work/accounts.yml" --env-out "$work/sandbox.env" >/dev/null &
sandbox_pid=$!
for _ in $(seq 300); do
  [ -f "$work/sandbox.env" ] && break
  kill -0 "$sandbox_pid" 2>/dev/null || { echo "swarm sandbox exited before it was ready" >&2; exit 1; }
  sleep 0.2
done
# shellcheck disable=SC1091
. "$work/sandbox.env"
cd "$work"
export GITHUB_STEP_SUMMARY="$work/summary.md" GITHUB_OUTPUT="$work/output"

# plan: the action's plan step (its table to the summary), then the split. 5 shards for
# 6 pairs of 40 instances: balanced, one pair each but one.
SWARM_COMMAND=plan SWARM_ACTION=terminate SWARM_IDS=ids.csv SWARM_ACCOUNTS=accounts.yml \
  SWARM_PLAN_OUT=would-act.txt bash "$step" >plan.log
grep -q '^### swarm plan terminate' summary.md
swarm shards --accounts accounts.yml --ids ids.csv --n 5 >matrix.json
mapfile -t shards < <(python3 -c 'import json,sys; [print(m["shard"]) for m in json.load(open(sys.argv[1]))["include"]]' matrix.json)
echo "plan: $(grep -c '^i-' would-act.txt) instance(s) would be acted on, ${#shards[@]} shard(s)"

# the matrix: one job per shard (here one after the other), as the workflow's shard step.
index=0
for shard in "${shards[@]}"; do
  SWARM_COMMAND=terminate SWARM_IDS=ids.csv SWARM_ACCOUNTS=accounts.yml SWARM_SHARD="$shard" \
    SWARM_LEDGER="ledger-$index.jsonl" SWARM_REPORT="report-$index.html" \
    SWARM_ARGS="--max-count 240 --protect-tag keep --expect-account 123456789012" \
    bash "$step" >"shard-$index.log" 2>&1 \
    || { echo "shard $shard failed:"; cat "shard-$index.log"; exit 1; }
  grep -m1 '^terminate:' "shard-$index.log"
  index=$((index + 1))
done

# merge: every shard left its ledger, then the merged ledgers against the ID list.
found=$(find . -maxdepth 1 -name 'ledger-*.jsonl' | wc -l)
[ "$found" -eq "${#shards[@]}" ] || { echo "$found of ${#shards[@]} shard ledgers"; exit 1; }
swarm ledger merge ledger-*.jsonl -o ledger.jsonl
swarm ledger summary ledger.jsonl
# The workflow passes --ids ids.csv, so that an instance of the list that no ledger
# names counts as left; this falls back to the ledgers alone on a swarm without it.
# Exit 1 when anything is left: kept, so that the count is said before the job fails.
status=0
if swarm ledger failed --help | grep -qE '^ +--ids[ ,]'; then
  swarm ledger failed --ids ids.csv ledger-*.jsonl >left.csv || status=$?
else
  swarm ledger failed ledger-*.jsonl >left.csv || status=$?
fi
left=$(grep -c '^i-' left.csv || true)
echo "left to retry: $left"
[ "$status" -eq 0 ] && [ "$left" -eq 0 ] && [ "$(swarm ledger summary --output json ledger.jsonl | python3 -c 'import json,sys; print(json.load(sys.stdin)["actions"]["terminate"]["succeeded"])')" -eq 240 ]
