#!/usr/bin/env bash
# The ctest labels of what changed since BASE (default main): the files that differ from the
# merge base of HEAD and BASE, uncommitted and untracked ones included, each mapped to the suites
# that test it. Prints a ctest label expression (for ctest -L), or "ALL" where a change reaches
# every suite (the build, a shared header of core/, the launch scripts), or nothing when no
# suite is concerned (documentation that no test reads). `make test-changed` runs it.
# Usage: scripts/changed_labels.sh [BASE]     (-v: also say which file chose which labels)
set -euo pipefail
verbose=0
if [[ ${1:-} == -v ]]; then verbose=1; shift; fi
base=${1:-main}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

merge_base=$(git merge-base HEAD "$base" 2>/dev/null) || {
  echo "changed_labels: no merge base of HEAD and '$base' (BASE=<branch or commit>)" >&2
  exit 2
}
files=$( (git diff --name-only "$merge_base"; git ls-files --others --exclude-standard) | sort -u)

exercises=$(awk '!/^#/ && NF {print $1}' exercises.txt)
is_exercise() { grep -qx -- "$1" <<<"$exercises"; }
# The labels a test file's suite carries in tests/CMakeLists.txt.
suite_labels() {
  sed -n -E "s/^ *dtlab_(unit_suite|test)\\($1 .*LABELS ([^)]*)\\).*/\\2/p" tests/CMakeLists.txt |
    sed -E 's/ (TIMEOUT|SOURCES|RUN_SERIAL|WHOLE).*//'
}

labels=()
all=0
while IFS= read -r f; do
  [[ -n $f ]] || continue
  got=""
  case "$f" in
    # An exercise's folder, and the rows that compile it too (exercises.txt's uses=: the mesh
    # composes pp's and tp's answers).
    tasks/*/* | solutions/*/*)
      got=$(cut -d/ -f2 <<<"$f")
      got="$got $(awk -v e="$got" '!/^#/ && $4 ~ /^uses=/ { n = split(substr($4, 6), u, ","); for (i = 1; i <= n; i++) if (u[i] == e) print $1 }' exercises.txt)" ;;
    # The axes' trainers of GPT-2 in the library, and the exercises that run them.
    common/src/pipeline/stage_ranks.cpp | common/include/dtlab/pipeline/stage_ranks.h) got="pipeline pp mesh" ;;
    common/src/shard/sharded_trainer.cpp | common/include/dtlab/shard/sharded_trainer.h) got="shard zero" ;;
    handouts/*.md) got=$(basename "$f" .md); is_exercise "$got" || got=docs ;;
    common/drivers/*) got=$(basename "$f" .cpp); got=${got%%_*} ;;
    common/exercises/*/*) got=$(cut -d/ -f3 <<<"$f") ;;
    common/include/dtlab/tasks/*.h) got=$(basename "$f" .h) ;;
    common/src/glue/* | common/include/dtlab/glue/*) got=task1 ;;
    common/src/tooling/* | common/include/dtlab/tooling/*) got=grader ;;
    common/src/core/* | common/include/dtlab/core/* | common/include/dtlab/pch.h) got=ALL ;;
    # common/src/P/x.cpp and common/include/dtlab/P/x.h: the part P.
    common/src/*/* | common/include/dtlab/*/*) got=$(cut -d/ -f3 <<<"${f/#common\/include\/dtlab\//common/src/}") ;;
    grader/* | plots/*) got="grader report" ;;
    # pp's mutants are linked into the mesh's mutants binary too (tests/CMakeLists.txt).
    tests/mutants/pp_mutants.cpp) got="grader pp mesh" ;;
    tests/mutants/*_mutants.cpp) got="grader $(basename "$f" _mutants.cpp)" ;;
    tests/golden/*) got=model ;;
    tests/data/*) got="data tokenizer" ;;
    tests/*.cpp | tests/*.sh)
      name=$(basename "${f%.*}")
      got=$(suite_labels "$name")
      [[ -n $got ]] || got=ALL ;;  # a helper header or a suite not declared: every suite
    tests/*.h) got=ALL ;;
    docs/* | README.md | .ci/*) got=docs ;;
    fuzz/*) got="" ;;  # make fuzz-replay, not ctest
    bench/*) got="" ;;  # benchmarks print figures; they test nothing
    *) got=ALL ;;      # the build, cmake/, scripts/, exercises.txt: every suite
  esac
  ((verbose)) && echo "changed_labels: $f -> ${got:-(no suite)}" >&2
  for l in $got; do
    if [[ $l == ALL ]]; then all=1; else labels+=("$l"); fi
  done
done <<<"$files"

if ((all)); then
  echo ALL
elif ((${#labels[@]})); then
  echo "^($(printf '%s\n' "${labels[@]}" | sort -u | paste -sd'|'))\$"
fi
