#!/usr/bin/env bash
# examples/github-actions.yml, played on one machine against the embedded fake EC2:
# the plan (swarm shards), two shard jobs (examples/shard-step.sh, as the workflow runs
# it) and the merge. Needs swarm with its sandbox extra
# (`pip install '.[sandbox]'` from this repository).
set -euo pipefail
work=$(mktemp -d)
trap 'kill "$sandbox_pid" 2>/dev/null || true; wait "$sandbox_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
here=$(cd "$(dirname "$0")" && pwd)

# Three regions in each of two accounts, each reached through a role.
swarm sandbox --port 0 --count 40 --regions 3 --accounts 2 \
  --ids-out "$work/ids.csv" --accounts-out "$work/accounts.yml" --env-out "$work/sandbox.env" >/dev/null &
sandbox_pid=$!
for _ in $(seq 300); do [ -f "$work/sandbox.env" ] && break; sleep 0.2; done
# shellcheck disable=SC1091
. "$work/sandbox.env"
cd "$work"

# plan
swarm shards --accounts accounts.yml --ids ids.csv --n 2 >matrix.json
python3 -c 'import json,sys; [print(m["shard"], m["pairs"]) for m in json.load(open(sys.argv[1]))["include"]]' matrix.json

# the matrix: one job per shard (here one after the other)
for k in 1 2; do
  LEDGER="ledger-$k.jsonl" bash "$here/shard-step.sh" "$k/2" 2>"shard-$k.log" \
    || { echo "shard $k/2 failed:"; cat "shard-$k.log"; exit 1; }
  tail -n 8 "shard-$k.log"
done

# merge
swarm ledger merge ledger-*.jsonl -o ledger.jsonl
swarm ledger summary ledger.jsonl
left=$(swarm ledger failed --format ids ledger.jsonl | wc -l)
echo "left to retry: $left"
[ "$left" -eq 0 ] && [ "$(swarm ledger summary --output json ledger.jsonl | python3 -c 'import json,sys; print(json.load(sys.stdin)["actions"]["terminate"]["succeeded"])')" -eq 240 ]
