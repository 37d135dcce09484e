#!/usr/bin/env bash
# Builds the fuzz harnesses (fuzz/CMakeLists.txt, clang 14) into BUILD and either replays each
# target's committed corpus once (`replay`: what CI runs) or fuzzes each target in turn for
# SECONDS (`fuzz`). Targets and their -max_len are in fuzz/targets.txt; TARGETS="a b" picks some.
#   fuzz/run.sh replay [BUILD]
#   fuzz/run.sh fuzz [BUILD] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: fuzz/run.sh replay|fuzz [BUILD] [SECONDS]}
build=${2:-build-fuzz}
seconds=${3:-60}

cxx=$(command -v clang++-14 || command -v clang++ || true)
if [[ -z $cxx ]]; then
  echo "fuzz: clang++-14 is missing: apt-get install clang-14 libclang-rt-14-dev" >&2
  exit 2
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# Through the kit's compiler cache like every other build (Note [Compiler cache] in
# cmake/DtlabCcache.cmake); DTLAB_CCACHE=OFF, or no ccache, compiles straight.
launcher=()
if ccache=$(command -v ccache); then
  stats_log=$build/ccache-stats.log
  [[ $stats_log == /* ]] || stats_log=$PWD/$stats_log
  launcher=("-DCMAKE_CXX_COMPILER_LAUNCHER=$PWD/cmake/ccache_launcher.sh;$ccache;$PWD;$stats_log")
fi
cmake -S fuzz -B "$build" "${generator[@]}" -DCMAKE_CXX_COMPILER="$cxx" "${launcher[@]}" >/dev/null
scripts/build.sh "$build" -j "${JOBS:-1}"

mkdir -p "$build/artifacts"

# fuzz_one TARGET MAX_LEN: replays or fuzzes one target, prints its line, returns its status.
fuzz_one() {
  local target=$1 max_len=$2
  local seeds=fuzz/corpus/$target log=$build/$target.$mode.log
  local flags=(-max_len="$max_len" -rss_limit_mb=2048 -timeout=10 -dict=fuzz/$target.dict
               -artifact_prefix="$build/artifacts/$target-")
  if [[ $mode == replay ]]; then
    # -runs=0: run every input of the corpus once, then stop.
    if "$build/$target" "${flags[@]}" -runs=0 "$seeds" >"$log" 2>&1; then
      echo "fuzz-replay: $target: $(find "$seeds" -type f | wc -l) inputs, $(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1), ok"
    else
      echo "fuzz-replay: $target FAILED (log: $log)"; tail -20 "$log"; return 1
    fi
  else
    # New inputs go to BUILD/corpus/<target>, not into the committed seeds.
    mkdir -p "$build/corpus/$target"
    if "$build/$target" "${flags[@]}" -max_total_time="$seconds" -print_final_stats=1 \
        "$build/corpus/$target" "$seeds" >"$log" 2>&1; then
      echo "fuzz: $target: $(grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE)' "$log" | tail -1)"
    else
      echo "fuzz: $target FOUND A PROBLEM (log: $log; input in $build/artifacts/)"; tail -30 "$log"; return 1
    fi
  fi
}

# JOBS targets at a time, each a single-threaded libFuzzer on a core of its own: every target
# still gets SECONDS of fuzzing, and 9 targets take ceil(9 / JOBS) x SECONDS instead of 9 x SECONDS.
status=0
running=0
while read -r target max_len; do
  [[ -z $target || $target == \#* ]] && continue
  [[ -n ${TARGETS:-} && " $TARGETS " != *" $target "* ]] && continue
  if ((running >= ${JOBS:-1})); then
    wait -n || status=1
    running=$((running - 1))
  fi
  fuzz_one "$target" "$max_len" &
  running=$((running + 1))
done < fuzz/targets.txt
while ((running > 0)); do
  wait -n || status=1
  running=$((running - 1))
done
exit $status
