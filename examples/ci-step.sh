#!/usr/bin/env bash
# A CI job step: start a fake EC2, terminate what it runs, fail the job on any loss.
# Against real AWS, drop the sandbox lines and let the job's credentials and
# AWS_REGION do the rest: `swarm terminate --ids ids.txt --yes --output json`.
set -euo pipefail
work=$(mktemp -d)
trap 'kill "$sandbox_pid" 2>/dev/null || true; wait "$sandbox_pid" 2>/dev/null || true; rm -rf "$work"' EXIT

swarm sandbox --port 0 --count 120 --protected 2 \
  --ids-out "$work/ids.txt" --env-out "$work/sandbox.env" >/dev/null &
sandbox_pid=$!
for _ in $(seq 300); do [ -f "$work/sandbox.env" ] && break; sleep 0.2; done
# shellcheck disable=SC1091
. "$work/sandbox.env"

# Exit 1 means some instances failed: the two protected ones here.
status=0
swarm terminate --ids "$work/ids.txt" --yes --ledger "$work/ledger.jsonl" \
  --output json >"$work/report.json" || status=$?
echo "swarm terminate exited $status"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["counts"], "throttled calls:", r["throttled_calls"])' "$work/report.json"

# The ledger names what is left; a later step (or a fixed input) retries exactly those.
swarm ledger failed "$work/ledger.jsonl" >"$work/left.txt"
echo "left to retry: $(wc -l <"$work/left.txt")"
[ "$status" -eq 1 ] && [ "$(wc -l <"$work/left.txt")" -eq 2 ]
