#!/usr/bin/env bash
# The container command of examples/k8s-indexed-job.yaml: one pod of a Kubernetes Indexed
# Job acts on one shard. Kubernetes numbers the pods 0..N-1 in JOB_COMPLETION_INDEX;
# swarm numbers shards 1..N, so pod i runs --shard (i+1)/N. Every pod reads the same ID
# list and computes the same split (swarm shards prints it), so no two pods ever share
# one account/region pair's rate limit. No 256-job ceiling here: N may be thousands.
#
#   JOB_COMPLETION_INDEX  set by Kubernetes                      (required)
#   SWARM_SHARDS          N: the Job's completions               (required)
#   SWARM_IDS             the ID list (a CSV with region/account) (default /work/ids.csv)
#   SWARM_ACCOUNTS        accounts file, if any                   (default: none)
#   SWARM_LEDGERS         folder for the ledgers, one per shard   (default /work/ledgers)
#   SWARM_ACTION          terminate, stop, start or reboot        (default terminate)
#   SWARM_ARGS            more arguments (rails), split on whitespace
set -euo pipefail
index=${JOB_COMPLETION_INDEX:?JOB_COMPLETION_INDEX: set by Kubernetes in an Indexed Job}
shards=${SWARM_SHARDS:?SWARM_SHARDS: the number of shards, as the Job completions}
case "$index$shards" in *[!0-9]*) echo "bad index $index or shard count $shards" >&2; exit 2 ;; esac
ledgers=${SWARM_LEDGERS:-/work/ledgers}
mkdir -p "$ledgers"
args=(--ids "${SWARM_IDS:-/work/ids.csv}" --shard "$((index + 1))/$shards")
if [ -n "${SWARM_ACCOUNTS:-}" ]; then
  args+=(--accounts "$SWARM_ACCOUNTS")
fi
if [ -n "${SWARM_ARGS:-}" ]; then
  # Split on whitespace, not as a shell would: a quote would stay in the value, and
  # --protect-tag "keep" would protect the tag named "keep" with its quotes, no other.
  case "$SWARM_ARGS" in
    *[\"\'\\]*)
      echo "SWARM_ARGS holds a quote or a backslash, which this script does not read as a shell does (it splits on whitespace only): write --protect-tag keep, not --protect-tag \"keep\"" >&2
      exit 2 ;;
  esac
  set -f
  # shellcheck disable=SC2206
  extra=($SWARM_ARGS)
  set +f
  args+=("${extra[@]}")
fi
# --resume: a pod that Kubernetes runs again for this index skips what its ledger holds
# as done. exec: the pod's SIGTERM (deletion, eviction) reaches swarm itself, which
# records what is left as pending before the grace period ends.
exec swarm "${SWARM_ACTION:-terminate}" "${args[@]}" \
  --ledger "$ledgers/ledger-$index.jsonl" --resume --yes --progress plain
