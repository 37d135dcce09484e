#!/usr/bin/env bash
# scripts/run_local_ranks.sh reports a failed rank with the rank's own exit code and fails: a rank
# that exits 3 reads "rank 1 failed (exit 3)", never "(exit 0)", and the run's status is not 0.
# Usage: tests/run_local_ranks_test.sh REPO_ROOT
set -euo pipefail
root=${1:?usage: $0 REPO_ROOT}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
status=0
said=$("$root/scripts/run_local_ranks.sh" 3 "$logs" -- sh -c 'echo rank {rank}; [ {rank} -eq 1 ] && exit 3; exit 0' 2>&1) ||
  status=$?
fail() { echo "run_local_ranks_test: $*; it said: $said" >&2; exit 1; }
[[ $status -ne 0 ]] || fail "a rank exited 3 and the run exited 0"
[[ $said == *"rank 1 failed (exit 3)"* ]] || fail "expected 'rank 1 failed (exit 3)'"
[[ $said != *"rank 2 failed"* ]] || fail "rank 2 exited 0 and was reported failed"
"$root/scripts/run_local_ranks.sh" 2 "$logs" -- true || fail "two ranks that exit 0 failed the run"
echo "run_local_ranks_test: a failed rank is named with its exit code and fails the run"
