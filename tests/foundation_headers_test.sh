#!/usr/bin/env bash
# Note [The foundation] (common/foundation.cmake): the targets that compile without LibTorch's
# headers read none of them. Every object of those targets is looked up in ninja's record of the
# headers each compile read (`ninja -t deps`, the compiler's own -MD list); a LibTorch header
# (torch/, ATen/, c10/) in any of them fails the test and names the object and the header, and so
# does a target this build configures with no object recorded (a renamed target would otherwise
# pass unseen). Each compiles as C++17 whatever the LibTorch. The programs of the suites among them must also need no LibTorch library at
# start-up (below).
# Usage: tests/foundation_headers_test.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR}
fail() { echo "foundation_headers_test: $*" >&2; exit 1; }
command -v ninja >/dev/null || fail "ninja is not installed"
[[ -f $build/build.ninja ]] || fail "$build is not a Ninja build folder"

# The targets, by the folder CMake gives their objects.
targets=(common/CMakeFiles/dtlab_foundation.dir common/CMakeFiles/dtlab_foundation_tooling.dir
         grader/CMakeFiles/dtlab_grader_base.dir tests/CMakeFiles/foundation_tests.dir
         tests/CMakeFiles/data_parallel_test.dir tests/CMakeFiles/multihost_test.dir
         tests/CMakeFiles/grader_mutants_test.dir tests/CMakeFiles/grader_hostile_test.dir)
deps=$(cd "$build" && ninja -t deps)
checked=0
absent=()
for dir in "${targets[@]}"; do
  # A target this configuration has no folder for is not part of it (the student release has no
  # grader_mutants_test); one it has must have been compiled.
  if [[ ! -d $build/$dir ]]; then
    absent+=("$dir")
    continue
  fi
  # ninja -t deps prints "OBJECT: #deps N, ..." and then each header indented.
  records=$(awk -v dir="$dir/" 'index($0, dir) == 1 && /: #deps/ { keep = 1; obj = $1; print; next }
                                /^[^ ]/ { keep = 0 } keep' <<<"$deps")
  objects=$(grep -c ': #deps' <<<"$records" || true)
  ((objects > 0)) || fail "no compile of $dir is recorded in $build's .ninja_deps: build it first (or was it renamed?)"
  # The first 5 (awk stops itself: a `| head` would end it with SIGPIPE, and pipefail the script).
  bad=$(awk '/: #deps/ { obj = $1; next }
             $1 ~ /(^|\/)(torch|ATen|c10)\// && n++ < 5 { print obj " read " $1 }' <<<"$records")
  [[ -z $bad ]] || fail "$dir is meant to compile without LibTorch (Note [The foundation]), but:
$bad"
  # Note [One standard for the foundation] (cmake/Dtlab.cmake): C++17 in every build folder, so a
  # 2.x build reads these compiles from the cache that the 1.13 build filled (another standard
  # preprocesses to other text: every one of them would be compiled twice).
  first=$(awk '/: #deps/ { sub(/:$/, "", $1); print $1; exit }' <<<"$records")
  command=$(cd "$build" && ninja -t commands "$first" | tail -n 1)
  [[ " $command " == *" -std=c++17 "* ]] || fail "$first is not compiled as C++17 (Note [One standard for the foundation]): $(grep -o -- '-std=[^ ]*' <<<"$command" || echo 'no -std')"
  checked=$((checked + objects))
done

# The programs of NO_TORCH suites and foundation_tests link no LibTorch either (dtlab_test in
# cmake/Dtlab.cmake): each of their ctest entries is a process, and loading LibTorch costs one
# about 0.6 s of CPU before its first line. readelf names what a program needs at start-up.
command -v readelf >/dev/null || fail "readelf is not installed (binutils)"
programs=(foundation_tests data_parallel_test grader_mutants_test grader_hostile_test)
linked=0
for program in "${programs[@]}"; do
  [[ -d $build/tests/CMakeFiles/$program.dir ]] || continue  # not in this configuration, as above
  [[ -f $build/tests/$program ]] || fail "$build/tests/$program is not built: build it first"
  needs=$(readelf -d "$build/tests/$program" | awk '/NEEDED/ && /lib(torch|c10)/ { print $NF }' | tr '\n' ' ')
  [[ -z $needs ]] || fail "tests/$program is meant to link no LibTorch (dtlab_test's NO_TORCH), but needs $needs"
  linked=$((linked + 1))
done
echo "foundation_headers_test: $checked compiles of $((${#targets[@]} - ${#absent[@]})) targets read no LibTorch header, as C++17," \
     "$linked programs need no LibTorch library${absent[*]:+ (not in this configuration: ${absent[*]})}"
