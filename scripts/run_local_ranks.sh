#!/usr/bin/env bash
# Runs N ranks of a command as local processes: `{rank}` in the command becomes 0..N-1. Rank 0
# prints to the terminal; the others write LOGDIR/rank<R>.log. Exits non-zero when any rank fails
# (and then stops the others), so a failed run never leaves processes behind.
# Usage: scripts/run_local_ranks.sh N LOGDIR -- CMD ARGS...   (e.g. --local_rank {rank})
set -euo pipefail
if [[ $# -lt 4 || "$3" != "--" ]]; then
  echo "usage: $0 N LOGDIR -- CMD ARGS... (with {rank} where the rank goes)" >&2
  exit 2
fi
n=$1 logs=$2
shift 3
mkdir -p "$logs"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT INT TERM
for ((r = n - 1; r >= 0; r--)); do
  args=("${@//\{rank\}/$r}")
  if [[ $r -eq 0 ]]; then
    "${args[@]}" &
  else
    "${args[@]}" > "$logs/rank$r.log" 2>&1 &
  fi
  pids[r]=$!
done
status=0
for ((r = 0; r < n; r++)); do
  # `if ! wait` would leave $? as the negation's 0: take the rank's own status.
  code=0
  wait "${pids[r]}" || code=$?
  if [[ $code -ne 0 ]]; then
    [[ $r -ne 0 ]] && { echo "rank $r failed (exit $code); its log:" >&2; tail -5 "$logs/rank$r.log" >&2; }
    status=1
  fi
done
trap - EXIT
exit $status
