#!/usr/bin/env bash
# The step of the swarm GitHub Action (action.yml): builds swarm's command line from the
# action's inputs (passed as SWARM_* environment variables, never pasted into the script)
# and ends in `exec swarm ...`. With exec, swarm *is* the step's process: when a run is
# cancelled, the runner's SIGINT (and its SIGTERM 7.5 s later) reaches swarm itself, which
# stops sending, records what is left as pending, with the reason, and exits 130 / 143.
# A shell left waiting on a child would take the signals and swarm would get none
# before the SIGKILL.
#
#   SWARM_COMMAND   terminate | stop | start | reboot | plan          (required)
#   SWARM_ACTION    with plan: the action to predict                 (default terminate)
#   SWARM_IDS       ID list: plain IDs, or a CSV with region/account columns
#   SWARM_FILTERS   instead of SWARM_IDS: NAME=VALUE filters, one per line
#   SWARM_REGION    default region of lines that name none
#   SWARM_ACCOUNTS  accounts file (c7n-org style YAML or TOML)
#   SWARM_SHARD     K/N: only the account/region pairs of shard K (see swarm shards)
#   SWARM_LEDGER    the ledger                                        (default swarm-ledger.jsonl)
#   SWARM_REPORT    the HTML report                                   (default swarm-report.html)
#   SWARM_PLAN_OUT  with plan: where to write the IDs that would be acted on
#   SWARM_ARGS      more arguments (rails and so on), split on whitespace, no quoting
set -euo pipefail

command=${SWARM_COMMAND:-}
case "$command" in
  terminate | stop | start | reboot) args=("$command") ;;
  plan) args=(plan "${SWARM_ACTION:-terminate}") ;;
  "") echo "swarm action: command is empty: terminate, stop, start, reboot or plan" >&2; exit 2 ;;
  *) echo "swarm action: command '$command' is not terminate, stop, start, reboot or plan" >&2; exit 2 ;;
esac

if [ -n "${SWARM_IDS:-}" ]; then
  args+=(--ids "$SWARM_IDS")
fi
while IFS= read -r filter; do
  filter=${filter#"${filter%%[![:space:]]*}"}
  [ -n "$filter" ] && args+=(--filter "$filter")
done <<<"${SWARM_FILTERS:-}"
[ -n "${SWARM_REGION:-}" ] && args+=(--region "$SWARM_REGION")
[ -n "${SWARM_ACCOUNTS:-}" ] && args+=(--accounts "$SWARM_ACCOUNTS")
[ -n "${SWARM_SHARD:-}" ] && args+=(--shard "$SWARM_SHARD")
if [ -n "${SWARM_ARGS:-}" ]; then
  # Split on whitespace, not as a shell would: a quote would stay in the value, and
  # --protect-tag "keep" would protect the tag named "keep" with its quotes, no other.
  case "$SWARM_ARGS" in
    *[\"\'\\]*)
      echo "swarm action: args holds a quote or a backslash, which it does not read as a shell does (it splits on whitespace only): write --protect-tag keep, not --protect-tag \"keep\"" >&2
      exit 2 ;;
  esac
  set -f  # split on whitespace, but never expand a glob
  # shellcheck disable=SC2206
  extra=($SWARM_ARGS)
  set +f
  args+=("${extra[@]}")
fi

ledger=${SWARM_LEDGER:-swarm-ledger.jsonl}
report=${SWARM_REPORT:-swarm-report.html}
output=${GITHUB_OUTPUT:-/dev/null}
for path in "$ledger" "$report" "${SWARM_PLAN_OUT:-}"; do
  case "$path" in
    *$'\n'* | *$'\r'*)
      # One per line in GITHUB_OUTPUT: a line end would write an output of its own.
      echo "swarm action: a file name holds a line end: $(printf %q "$path")" >&2
      exit 2 ;;
  esac
done

# Appends its input to the file $1, all of it or nothing: a part the disk took (a line
# cut short, a table cut inside its fence) would break what is read after it, and is
# taken back. On failure, prints why and returns 1.
append_whole() {
  local size="" why
  if [ -f "$1" ]; then size=$(wc -c <"$1" | tr -d ' '); fi
  if ! why=$({ cat >>"$1"; } 2>&1); then
    if [ -n "$size" ] && command -v truncate >/dev/null; then
      truncate -s "$size" "$1" 2>/dev/null || true
    fi
    why=${why##*: }
    echo "${why:-the write failed}"
    return 1
  fi
}

# Step outputs (NAME=VALUE) that cannot be written (a full disk) cost the run nothing: a
# warning says why, and a later step that reads them gets none.
set_outputs() {
  local unwritten names
  if ! unwritten=$(printf '%s\n' "$@" | append_whole "$output"); then
    names=$(printf '%s, ' "${@%%=*}")
    echo "::warning title=swarm::could not set the step's outputs ${names%, } (GITHUB_OUTPUT $output): $unwritten"
  fi
}

if [ "$command" = plan ]; then
  # A plan changes nothing, so this step may outlive swarm: its table goes to the job's
  # summary too, for the person who approves the run.
  plan_out=${SWARM_PLAN_OUT:-swarm-plan-ids.txt}
  # Here swarm is a child, its table read after it: the runner's SIGINT and SIGTERM are
  # passed on to it (and it stops as a run does), or it would go on after the step ended;
  # one that comes before it started is passed on as it starts.
  child="" signalled="" table=""
  forward() {
    signalled=$1
    if [ -n "$child" ]; then kill -s "$1" "$child" 2>/dev/null || true; fi
  }
  trap 'forward INT' INT
  trap 'forward TERM' TERM
  trap 'if [ -n "$table" ]; then rm -f "$table"; fi' EXIT
  table=$(mktemp)
  # Job control gives it a process group of its own, so each signal reaches it once.
  set -m
  COLUMNS=${COLUMNS:-160} swarm "${args[@]}" --plan-out "$plan_out" >"$table" &
  child=$!
  set +m
  if [ -n "$signalled" ]; then forward "$signalled"; fi
  status=0
  while :; do
    wait "$child" && status=0 || status=$?
    kill -0 "$child" 2>/dev/null || break  # else a signal ended the wait, not swarm
  done
  trap - INT TERM
  # Named only once it is there: a plan stopped before it would name no file.
  if [ -f "$plan_out" ]; then set_outputs "plan-ids=$plan_out"; fi
  cat "$table"
  if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
    # A summary that cannot be written costs the plan nothing: a warning says why.
    if ! unwritten=$({
      echo "### swarm plan ${SWARM_ACTION:-terminate}"
      echo
      if [ -s "$table" ]; then
        echo '```text'
        cat "$table"
        echo '```'
      else
        echo "swarm plan exited $status before a plan: its error is in the step's log."
      fi
    } | append_whole "$GITHUB_STEP_SUMMARY"); then
      echo "::warning title=swarm plan::could not append the plan to the step summary ($GITHUB_STEP_SUMMARY): $unwritten"
    fi
  fi
  planned=no
  if grep -q '^predicted: ' "$table"; then planned=yes; fi
  why="some instances would fail or could not be read"
  if grep -q '^permission in .* not checked' "$table"; then
    why="the permission could not be checked (the line 'permission in … not checked' says why)"
  fi
  if [ "$status" -eq 1 ] && [ "$planned" = yes ]; then
    # Rows that would fail (protected, gone, in another state) or could not be read, or
    # a permission not checked: the table says which, for the person who approves. (An
    # exit 1 with no table is an error before the plan: the step fails with it.)
    echo "::warning title=swarm plan::$why (swarm plan exit 1): see the table"
    exit 0
  fi
  exit "$status"
fi

set_outputs "ledger=$ledger" "report=$report"
# swarm appends its own summary to $GITHUB_STEP_SUMMARY. --yes: a CI job has no
# terminal to confirm on; the rails in SWARM_ARGS (--max-count, --protect-tag,
# --expect-account) guard the run instead.
exec swarm "${args[@]}" --ledger "$ledger" --report "$report" --yes --progress plain
