#!/usr/bin/env bash
# A CI job step: start a fake EC2, terminate what it runs, fail the job on any loss.
# Against real AWS, drop the sandbox lines and let the job's credentials and
# AWS_REGION do the rest: `swarm terminate --ids ids.txt --yes --output json`.
set -euo pipefail
command -v swarm >/dev/null || { echo "swarm is not on PATH (activate its venv: . .venv/bin/activate)" >&2; exit 127; }
work=$(mktemp -d)
trap 'kill "$sandbox_pid" 2>/dev/null || true; wait "$sandbox_pid" 2>/dev/null || true; rm -rf "$work"' EXIT

# The ledger is the record of the run: set SWARM_LEDGER to keep it (a job artifact);
# by default it goes with the rest of this step's scratch folder.
ledger=${SWARM_LEDGER:-$work/ledger.jsonl}

swarm sandbox --port 0 --count 120 \
  --ids-out "$work/ids.txt" --env-out "$work/sandbox.env" >/dev/null &
sandbox_pid=$!
for _ in $(seq 300); do
  [ -f "$work/sandbox.env" ] && break
  kill -0 "$sandbox_pid" 2>/dev/null || { echo "swarm sandbox exited before it was ready" >&2; exit 1; }
  sleep 0.2
done
# shellcheck disable=SC1091
. "$work/sandbox.env"

# A runner that cancels the job signals this script, not its children: forward the
# signal so swarm stops in order (calls in flight finish, the rest is recorded pending)
# before the runner's SIGKILL. A step that does nothing after swarm can simply `exec` it.
swarm terminate --ids "$work/ids.txt" --yes --ledger "$ledger" \
  --output json >"$work/report.json" &
swarm_pid=$!
trap 'kill -TERM "$swarm_pid" 2>/dev/null || true' TERM INT HUP
status=0
wait "$swarm_pid" || status=$?
while kill -0 "$swarm_pid" 2>/dev/null; do  # a forwarded signal: wait for swarm's own exit
  status=0
  wait "$swarm_pid" || status=$?
done
trap - TERM INT HUP
# 0: all done; 1: some instances failed or are pending; anything else: refused,
# interrupted or cut off (its "meaning" says which).
echo "swarm terminate exited $status"
# (Killed outright, swarm prints no object: its own exit code is what the step ends with.)
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r.get("counts") or r.get("error"), "-", r["meaning"])' "$work/report.json" \
  || echo "swarm printed no summary object"
if [ -z "${SWARM_LEDGER:-}" ] && [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  # The summary names the ledger, which goes with this step's scratch folder.
  echo "The ledger above was this step's scratch file, removed at its end: set SWARM_LEDGER to keep it." >>"$GITHUB_STEP_SUMMARY" || true
fi
[ "$status" -le 1 ] || exit "$status"

# The gate: every ID of the list not known terminated, by the ledger. With --ids, IDs EC2
# said do not exist (a wrong region or account: nothing was terminated) and IDs the
# ledger never reached count as left too, and so do permanent failures (a protected
# instance: someone must look); --retryable only leaves those out of the list, which is
# what a later step (or a fixed input) retries with --resume. Exit 1 if anything is left.
left=0
swarm ledger failed --retryable --ids "$work/ids.txt" "$ledger" >"$work/left.txt" || left=$?
echo "left to retry: $(wc -l <"$work/left.txt")"
exit "$left"
