#!/usr/bin/env bash
# Every row of exercises.txt reaches a student: the README's table (and the student release's,
# docs/STUDENTS.md), the handouts' index, `make help`, make check-T building only what grading T
# needs, make T-solution saying in one line that a student kit has no solutions, tests under the
# label T that need no solutions (so `make test-T` finds them in a student kit too), and a handout
# whose "How it is checked" names exactly the checks `grader list` gives T. A new row fails here
# until it is documented.
# Usage: tests/exercise_docs_test.sh REPO_ROOT BUILD_DIR
set -euo pipefail
root=${1:?usage: $0 REPO_ROOT BUILD_DIR} build=${2:?usage: $0 REPO_ROOT BUILD_DIR}
failures=0
fail() { echo "exercise_docs_test: $*" >&2; failures=$((failures + 1)); }

exercises=$(awk '!/^#/ && NF {print $1}' "$root/exercises.txt")
[[ -n $exercises ]] || { echo "exercise_docs_test: no exercise rows in $root/exercises.txt" >&2; exit 1; }
help=$(make -s -C "$root" help 2>&1) || { echo "exercise_docs_test: make help failed: $help" >&2; exit 1; }
listing=$("$build/grader/grader" list)

for t in $exercises; do
  for readme in README.md docs/STUDENTS.md; do
    [[ -f $root/$readme ]] || continue  # a student kit's README.md is docs/STUDENTS.md
    grep -qE "^\|.*\`tasks/$t\`.*\(handouts/$t\.md\)" "$root/$readme" ||
      fail "$readme: no row for exercise $t in its table (| $t | ... | \`tasks/$t\` | [handouts/$t.md](handouts/$t.md) |): add one"
  done
  [[ -f $root/handouts/$t.md ]] || fail "handouts/$t.md is missing: exercise $t (exercises.txt) needs a handout"
  grep -qF "]($t.md)" "$root/handouts/README.md" ||
    fail "handouts/README.md: no row for exercise $t in its table ([$t.md]($t.md)): add one"
  for target in "make $t" "make check-$t" "make test-$t"; do
    grep -qE "(^| )$target( |$)" <<<"$help" || fail "make help does not name '$target': its exercise lines come from exercises.txt"
  done

  # make check-T builds the grader and T, not the whole kit.
  build_lines=$(make -n -s -C "$root" "check-$t" | grep -E '^scripts/build\.sh' || true)
  [[ $build_lines =~ --target\ grader\ $t$ && $(wc -l <<<"$build_lines") -eq 1 ]] ||
    fail "make check-$t should build only '--target grader $t'; it runs: ${build_lines:-no build}"

  # In a student kit (no solutions/), make T-solution says so at once and fails. (-n: a Makefile
  # without that rule prints the run instead of building and starting it.)
  status=0
  said=$(make -n -s -C "$root" "$t-solution" HAVE_SOLUTIONS= 2>&1) || status=$?
  [[ $status -ne 0 && $said == *"not part of the student kit"* && $(wc -l <<<"$said") -eq 1 ]] ||
    fail "make $t-solution in a student kit: expected one line saying the solutions are not part of it and a non-zero exit, got exit $status: ${said%%$'\n'*}"

  # Tests labelled T that a student kit has (Note: tests/CMakeLists.txt labels the ones that
  # need solutions/ 'solutions').
  found=$(ctest --test-dir "$build" -N -L "^$t\$" -LE '^solutions$' | sed -n 's/^Total Tests: //p')
  [[ ${found:-0} -ge 1 ]] ||
    fail "no test labelled $t needs no solutions: make test-$t would find none in a student kit; label a suite of the parts $t uses"

  # The handout lists the grader's checks of T, no more, no fewer.
  checks=$(awk -v t="$t" '/^[^ ]/ {mine = ($1 == t); next} mine && NF {print $1}' <<<"$listing" | sort -u)
  [[ -n $checks ]] || fail "grader list shows no check of $t"
  section=$(awk '/^## How it is checked/ {inside = 1; next} /^## / {inside = 0} inside' "$root/handouts/$t.md" 2>/dev/null || true)
  named=$(grep -oE '\*\*[a-z0-9, -]+\*\*' <<<"$section" | tr -d '*' | tr ',' '\n' | tr -d ' ' | sort -u || true)
  missing=$(comm -23 <(echo "$checks") <(echo "$named") | tr '\n' ' ')
  [[ -z ${missing// /} ]] ||
    fail "handouts/$t.md's 'How it is checked' does not name the check(s) $missing(grader list): add a **check** line for each"
  listed=$(grep -E '^- \*\*' <<<"$section" | grep -oE '\*\*[a-z0-9, -]+\*\*' | tr -d '*' | tr ',' '\n' | tr -d ' ' | sort -u || true)
  extra=$(comm -13 <(echo "$checks") <(echo "$listed") | tr '\n' ' ')
  [[ -z ${extra// /} ]] ||
    fail "handouts/$t.md's 'How it is checked' lists $extra, which grader list does not have for $t"
done

# One rule for messages between stage ranks (c10d pairs sends and receives by order): no text
# may say the kit matches them by tag.
stale=$(grep -rnE 'matched by micro-batch \(a tag\)|not by arrival order' "$root/common" "$root/docs" "$root/handouts" || true)
[[ -z $stale ]] || fail "a text says messages are matched by tag, but c10d pairs them by order: $stale"

[[ $failures -eq 0 ]] || exit 1
echo "exercise_docs_test: $(wc -w <<<"$exercises") exercises, each in the READMEs, the handouts and make help, with its checks and student-kit tests"
