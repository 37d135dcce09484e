#!/usr/bin/env bash
# Where a build folder's time went (Note [CI's budget] in .ci/run): the N slowest compiles of its
# last build (ninja's log: each output's latest start and end, in ms) and the N slowest tests of
# its last `make test` (the ctest output it keeps in Testing/make-test.log: each entry's line,
# "N/M Test #K: NAME ... Passed S sec"), each with its seconds, and the totals. Not ctest's
# CTestCostData.txt, which keeps no time for an entry whose name holds a space (a parameterised
# case's "  # GetParam() = ...": every mutant and fair grading shows 0 runs there) and holds means
# over runs; nor its LastTest.log, which any `ctest -N` in the folder rewrites.
#   scripts/build_costs.sh BUILD_DIR [N]     (N: 20 unless given)
#   scripts/build_costs.sh --exercises BUILD_DIR
# --exercises: what each exercise row (exercises.txt) adds to the build and to ctest: its compiles
# (its tasks/ and solutions/ files, its driver and kit code, its mutants, its own test binaries:
# objects of the targets T, T-solution, driver-T, kit-T, solution-T, T-mutants and tests named
# T_*), their seconds, and the entries labelled T with their seconds (an entry named for one
# exercise, as the grader's mutants are, counts for it alone; one labelled by several exercises is
# shared among them equally).
# A compile that came from the compiler cache shows the cache's time, not the compiler's: run it
# after a cold build (a new CCACHE_DIR) to see what compiling costs.
set -euo pipefail
exercises=0
if [[ ${1:-} == --exercises ]]; then
  exercises=1
  shift
fi
build=${1:?usage: scripts/build_costs.sh [--exercises] BUILD_DIR [N]}
n=${2:-20}
log=$build/.ninja_log
pass=$build/Testing/make-test.log
if [[ ! -f $log && ! -f $pass ]]; then
  echo "build_costs: $build has neither .ninja_log (no build) nor $pass (no make test)" >&2
  exit 2
fi
# The last pass's entries, a line each: the name to its first space, and the seconds.
times=""
if [[ -f $pass ]]; then
  times=$(sed -nE 's/^ *[0-9]+\/[0-9]+ +Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec$/\1 \2/p' "$pass")
fi
if ((exercises)); then
  root=$(cd "$(dirname "$0")/.." && pwd)
  list=$(awk '!/^#/ && NF {print $1}' "$root/exercises.txt")
  # Which exercises label each entry: "NAME EXERCISE" lines.
  members=$(for t in $list; do
    ctest --test-dir "$build" -N -L "^$t\$" 2>/dev/null | sed -n "s/^ *Test *#[0-9]*: \([^ ]*\).*/\1 $t/p"
  done)
  # An entry's seconds go to the exercise its name starts with (Tp/GraderMutants...: a mutant of
  # tp), else in equal shares to the exercises that label it (data_parallel_test's cases: task2a,
  # task2b, task3), so that the rows add up to the suite.
  tests=$(awk 'NR == FNR { n[$1]++; ex[$1, n[$1]] = $2; next }
    ($1 in n) {
      split($1, parts, "/"); owner = ""
      for (i = 1; i <= n[$1]; i++) if (tolower(parts[1]) == ex[$1, i]) owner = ex[$1, i]
      if (owner != "") { secs[owner] += $NF; count[owner] += 1; next }
      for (i = 1; i <= n[$1]; i++) { secs[ex[$1, i]] += $NF / n[$1]; count[ex[$1, i]] += 1 / n[$1] }
    }
    END { for (e in secs) printf "%s %.1f %.0f\n", e, count[e], secs[e] }' <(echo "$members") <(echo "$times") 2>/dev/null || true)
  printf '%-10s %9s %12s %13s %12s\n' exercise compiles "compile s" "ctest entries" "ctest s"
  for t in $list; do
    read -r count seconds < <(awk -F'\t' -v t="$t" '!/^#/ && ($4 ~ /\.(o|gch|pch)$/) { last[$4] = ($2 - $1) / 1000 }
      END {
        pattern = "(^|/)(" t "|" t "-solution|driver-" t "|kit-" t "|solution-" t "|" t "-mutants|" t "_[a-z_]*test)\\.dir/"
        for (o in last) if (o ~ pattern) { n++; s += last[o] }
        printf "%d %.0f\n", n, s
      }' "$log" 2>/dev/null || echo "0 0")
    read -r _ entries test_seconds < <(awk -v t="$t" '$1 == t' <<<"$tests" | grep . || echo "$t 0 0")
    printf '%-10s %9d %12d %13s %12d\n' "$t" "$count" "$seconds" "$entries" "$test_seconds"
  done
  exit 0
fi
if [[ -f $log ]]; then
  # Ninja appends a line per output built (v5: start end mtime output hash); the last line of an
  # output is its latest build. Only object files and precompiled headers are compiles.
  awk -v n="$n" -F'\t' '!/^#/ && ($4 ~ /\.(o|gch|pch)$/) { t[$4] = ($2 - $1) / 1000 }
    END {
      for (o in t) { total += t[o]; count++ }
      printf "%s: %d compiles, %.0f s of compiling (both cores together: wall is about half)\n", FILENAME, count, total
    }' "$log"
  awk -F'\t' '!/^#/ && ($4 ~ /\.(o|gch|pch)$/) { t[$4] = ($2 - $1) / 1000 } END { for (o in t) printf "%8.1f s  %s\n", t[o], o }' \
    "$log" | sort -rn | head -n "$n"
fi
if [[ -f $pass ]]; then
  awk -v f="$pass" 'NF { total += $2; count++ }
    END { printf "%s: %d tests, %.0f s of test time (ctest -j runs them side by side)\n", f, count, total }' <<<"$times"
  awk 'NF { printf "%8.1f s  %s\n", $2, $1 }' <<<"$times" | sort -rn | head -n "$n"
fi
