#!/usr/bin/env bash
# One job of a matrix: act on the account/region pairs of shard K/N, and nothing else.
# Every job runs this with the same ID list and accounts file; `swarm shards` printed
# the matrix, so no two jobs ever share one pair's rate limit.
#   IDS       ID list, a CSV with instance_id,region,account   (default ids.csv)
#   ACCOUNTS  accounts file (c7n-org style)                     (default accounts.yml)
#   LEDGER    this shard's ledger, uploaded as an artifact      (default ledger.jsonl)
#   ACTION    terminate, stop, start or reboot                  (default terminate)
set -euo pipefail
shard=${1:?usage: shard-step.sh K/N}
# exec: a runner that cancels the job signals this process, which is then swarm itself,
# so it stops in order (calls in flight finish, the rest is recorded pending).
exec swarm "${ACTION:-terminate}" --ids "${IDS:-ids.csv}" --accounts "${ACCOUNTS:-accounts.yml}" \
  --shard "$shard" --ledger "${LEDGER:-ledger.jsonl}" --yes --progress plain
