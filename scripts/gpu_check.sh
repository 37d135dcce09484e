#!/usr/bin/env bash
# gpu_check: everything the kit does on a GPU, in one bounded run on a machine with NVIDIA GPUs
# (`make gpu-check [TORCH=/path/to/venv]`):
#
#   1 gpus       nvidia-smi's GPU list (none: one line, exit 1, before anything else)
#   2 torch      the torch to build against: version, CUDA, NCCL, the GPUs it sees
#   3 deps       the Debian packages of the build (Gloo's headers, fmt, utf8proc, CLI11, nlohmann-json, GoogleTest,
#                pkg-config): the machine's own, else .gpu-deps unpacked (scripts/gpu_deps.sh)
#   4 configure  the kit against that torch into build-gpu/ (ninja); fails unless it says
#                nccl=yes and cuda=yes
#   5 build      what steps 6-9 run: gpu_test and the programs it starts, the bench programs
#                (-j nproc; ninja -k 0: what builds, builds)
#   6 gpu-tests  ctest -L gpu --output-on-failure (no test labelled gpu is a failure)
#   7 bench-gpt2, 8 bench-task1   the step benchmarks with --device cuda (tokens/s, share of
#                the GPU's nominal fp32 peak)
#   9 eager      bench/compare_eager.py --device cuda (GPT-2): the kit's step against eager
#                PyTorch on the same GPU; skipped where the venv has no transformers
#  10 build-rest everything else (`all`), with what the budget has left: the whole kit compiles
#                against this torch
#
# Every step runs under `timeout` and is timed; the whole run stays within GPU_CHECK_BUDGET
# seconds (default 480: 8 minutes). Measured on one H100 with 16 cores (docs/MEASUREMENTS.md, "On
# a GPU"): configure 1 s, build 71 s, gpu-tests 16 s, both benchmarks 8 s, eager 74 s, the rest of
# the kit 56 s: 180 s for steps 1-9; a step that finds the budget spent is
# skipped, and says so. A second run on the same machine rebuilds only what changed.
#
# Output: the full log in build-gpu/gpu-check.log; the summary (GPU, driver, torch, commit, each
# step's status and time, the benchmark figures) in build-gpu/gpu-check-summary.txt and at the
# end of stdout. Exit 0 when every step that ran passed, 1 otherwise.
#
# Options: --torch DIR   a venv (or a torch/ package folder) with a CUDA torch 2.x; default: the
#                        torch of python3 on PATH
#          --build DIR   the build folder (default build-gpu)
# Environment: GPU_CHECK_BUDGET (seconds), JOBS (default nproc), GPU_DEPS_PREFIX (where
#          scripts/gpu_deps.sh --unpack put the packages; default BUILD/deps, unpacked here),
#          GPU_DEPS_FORCE=1 (use .gpu-deps even where the machine has the packages),
#          GPU_CHECK_SKIP="eager bench-task1" (steps to skip, by name; a rerun after a fix).
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO" || exit 1
TORCH_ARG=""
BUILD="build-gpu"
while [ $# -gt 0 ]; do
  case "$1" in
    --torch) TORCH_ARG="${2:?--torch DIR}"; shift 2 ;;
    --build) BUILD="${2:?--build DIR}"; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: unknown argument $1 (--torch DIR, --build DIR, --help)" >&2; exit 2 ;;
  esac
done

# 1. A GPU, or one line and exit 1 at once.
if [ "$(uname -s)" != Linux ]; then
  echo "gpu-check: no NVIDIA GPU here: this is $(uname -s), the check runs on Linux" >&2
  exit 1
fi
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "gpu-check: no NVIDIA GPU here: nvidia-smi not found (no NVIDIA driver)" >&2
  exit 1
fi
if ! GPU_LIST="$(timeout 30 nvidia-smi -L 2>&1)" || ! grep -q "^GPU [0-9]" <<<"$GPU_LIST"; then
  echo "gpu-check: no NVIDIA GPU here: nvidia-smi -L lists none ($(head -1 <<<"$GPU_LIST"))" >&2
  exit 1
fi

BUDGET="${GPU_CHECK_BUDGET:-480}"
JOBS="${JOBS:-$(nproc)}"
START=$SECONDS
mkdir -p "$BUILD" || exit 1
BUILD="$(cd "$BUILD" && pwd)"
LOG="$BUILD/gpu-check.log"
SUMMARY="$BUILD/gpu-check-summary.txt"
STEPS="$BUILD/gpu-check-steps"
mkdir -p "$STEPS"
rm -f "$STEPS"/*.out "$STEPS"/configure.cmake  # nothing of an earlier run is read as this one's
: > "$LOG"
STATUS_LINES=()
FIGURES=()
FAILED=0

say() { echo "$*" | tee -a "$LOG"; }

# run_step NAME CAP COMMAND...: runs COMMAND under timeout (CAP seconds, or what the budget has
# left), its output to $STEPS/NAME.out and the log; records PASS/FAIL/SKIP and the time.
run_step() {
  local name="$1" cap="$2"
  shift 2
  local left=$((BUDGET - (SECONDS - START)))
  if [[ " ${GPU_CHECK_SKIP:-} " == *" $name "* ]]; then
    record "$name" SKIP 0 "GPU_CHECK_SKIP"
    return 2
  fi
  local limit=$((cap < left ? cap : left))
  if [ "$limit" -lt 10 ]; then
    record "$name" SKIP 0 "budget of ${BUDGET} s spent"
    return 2
  fi
  say ""
  say "== gpu-check: $name (at most ${limit} s): $*"
  local t0=$SECONDS rc=0
  timeout -k 10 "$limit" "$@" > "$STEPS/$name.out" 2>&1 || rc=$?
  cat "$STEPS/$name.out" >> "$LOG"
  local took=$((SECONDS - t0))
  if [ "$rc" = 0 ]; then
    record "$name" PASS "$took" ""
  elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    record "$name" FAIL "$took" "timed out after ${limit} s"
  else
    record "$name" FAIL "$took" "exit code $rc"
  fi
  return "$rc"
}

record() {  # NAME STATUS SECONDS NOTE
  local line
  line="$(printf '%-12s %-4s %5s s  %s' "$1" "$2" "$3" "$4")"
  STATUS_LINES+=("$line")
  [ "$2" = FAIL ] && FAILED=1
  say "-- $line"
}

tail_of() {  # NAME LINES: the end of a step's output, on stdout (the whole of it is in the log)
  [ -f "$STEPS/$1.out" ] && tail -n "$2" "$STEPS/$1.out" | sed 's/^/   | /'
}

commit() {  # the commit, and whether the tree differs from it; "unknown" without git
  local c
  c="$(git -C "$REPO" rev-parse "$@" HEAD 2>/dev/null)" || { echo "unknown (no git here)"; return; }
  git -C "$REPO" diff --quiet HEAD 2>/dev/null && echo "$c" || echo "$c + uncommitted changes"
}
say "gpu-check: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname), commit $(commit --short), budget ${BUDGET} s, ${JOBS} jobs"
say "$GPU_LIST"
GPU_QUERY="$(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
GPU_NAME="$(cut -d, -f1 <<<"$GPU_QUERY" | sed 's/^ *//')"
DRIVER="$(cut -d, -f2 <<<"$GPU_QUERY" | sed 's/^ *//')"
record gpus PASS 0 "$(grep -c '^GPU [0-9]' <<<"$GPU_LIST") x $GPU_NAME, driver $DRIVER"

# 2. The torch: a venv (bin/python3), a torch/ folder, or python3's on PATH.
PYTHON=python3
if [ -n "$TORCH_ARG" ]; then
  if [ -x "$TORCH_ARG/bin/python3" ]; then
    PYTHON="$TORCH_ARG/bin/python3"
  elif [ -f "$TORCH_ARG/share/cmake/Torch/TorchConfig.cmake" ]; then
    PYTHON="python3"  # a torch/ folder: probed through python3 only for its figures
  else
    say "gpu-check: --torch $TORCH_ARG: neither a venv (bin/python3) nor a torch/ folder"
    exit 1
  fi
fi
cat > "$STEPS/probe.py" <<'EOF'
import os, sys
import torch
print("torch_dir=" + os.path.dirname(torch.__file__))
print("prefix=" + sys.prefix)
print("version=" + torch.__version__)
print("cuda=" + str(torch.version.cuda))
print("available=" + str(torch.cuda.is_available()))
print("devices=" + str(torch.cuda.device_count()))
try:
    print("nccl=" + ".".join(str(x) for x in torch.cuda.nccl.version()))
except Exception as e:  # a CPU wheel
    print("nccl=none (" + type(e).__name__ + ")")
if not torch.cuda.is_available():
    sys.exit("torch {} sees no GPU: torch.cuda.is_available() is False".format(torch.__version__))
print("device0=" + torch.cuda.get_device_name(0))
torch.ones(1, device="cuda").add_(1)
torch.cuda.synchronize()
print("kernel=ran")
EOF
run_step torch 120 "$PYTHON" "$STEPS/probe.py"
tail_of torch 12
probe() { sed -n "s/^$1=//p" "$STEPS/torch.out" 2>/dev/null | head -1; }
TORCH_DIR="$(probe torch_dir)"
if [ -n "$TORCH_ARG" ] && [ -f "$TORCH_ARG/share/cmake/Torch/TorchConfig.cmake" ]; then
  TORCH_DIR="$(cd "$TORCH_ARG" && pwd)"
fi
TORCH_VERSION="$(probe version)"
if [ -z "$TORCH_DIR" ]; then
  say "gpu-check: $PYTHON has no torch (make gpu-check TORCH=/path/to/venv)"
fi

# 3. The Debian packages: the machine's own where it has them all, else .gpu-deps unpacked.
CMAKE_DEPS_ARGS=()
have_system_deps() {
  local h missing=""
  [ "${GPU_DEPS_FORCE:-0}" = 1 ] && missing=" (GPU_DEPS_FORCE=1)"
  for h in gloo/algorithm.h fmt/core.h CLI/CLI.hpp nlohmann/json.hpp utf8proc.h gtest/gtest.h; do
    [ -f "/usr/include/$h" ] || [ -f "/usr/local/include/$h" ] || missing="$missing $h"
  done
  command -v pkg-config >/dev/null || missing="$missing pkg-config"
  echo "$missing"
}
# shellcheck disable=SC2317  # run through bash -c (export -f)
deps_step() {
  local missing prefix="${GPU_DEPS_PREFIX:-$BUILD/deps}"
  missing="$(have_system_deps)"
  if [ -z "$missing" ]; then
    echo "the machine has every package the build needs (headers in /usr/include, pkg-config)"
    return 0
  fi
  echo "the machine lacks:$missing"
  if [ -f "$prefix/cmake-args" ] && [ -z "${GPU_DEPS_REUNPACK:-}" ] && [ -n "${GPU_DEPS_PREFIX:-}" ]; then
    echo "using the packages already unpacked in $prefix"
  elif compgen -G "$REPO/.gpu-deps/*.deb" >/dev/null; then
    [ "$prefix" = "$BUILD/deps" ] && rm -rf "$prefix"  # only ours: a fresh copy
    "$REPO/scripts/gpu_deps.sh" --unpack "$prefix" || return 1
  else
    echo "no .gpu-deps to unpack: run scripts/gpu_deps.sh on a Debian 12 machine and carry .gpu-deps"
    return 1
  fi
}
export REPO BUILD GPU_DEPS_PREFIX GPU_DEPS_REUNPACK GPU_DEPS_FORCE
export -f deps_step have_system_deps
run_step deps 60 bash -c deps_step
tail_of deps 8
if [ -z "$(have_system_deps)" ]; then
  :
elif [ -f "${GPU_DEPS_PREFIX:-$BUILD/deps}/cmake-args" ]; then
  DEPS_PREFIX="${GPU_DEPS_PREFIX:-$BUILD/deps}"
  mapfile -t CMAKE_DEPS_ARGS < "$DEPS_PREFIX/cmake-args"
  # pkg-config reads the prefix's .pc files only, never the machine's.
  export PKG_CONFIG_LIBDIR="$DEPS_PREFIX/usr/lib/x86_64-linux-gnu/pkgconfig:$DEPS_PREFIX/usr/share/pkgconfig"
  export PKG_CONFIG_PATH=""
fi

# 4. Configure: CUDA and NCCL or a failure. The arguments of the packages travel in a file
# (one a line), as gpu_deps.sh wrote them.
printf '%s\n' "${CMAKE_DEPS_ARGS[@]}" > "$STEPS/deps-args"
# shellcheck disable=SC2317  # run through bash -c (export -f)
configure_step() {
  local args=() line
  mapfile -t args < <(grep -v '^$' "$STEPS/deps-args")
  cmake -S "$REPO" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDTLAB_TORCH="$TORCH_DIR" -DDTLAB_CUDA=AUTO \
    "${args[@]}" 2>&1 | tee "$STEPS/configure.cmake"
  [ "${PIPESTATUS[0]}" = 0 ] || return 1
  line="$(grep -E '^-- dtlab: C\+\+' "$STEPS/configure.cmake" | tail -1)"
  case "$line" in
    *"nccl=yes"*"cuda=yes"*) return 0 ;;
    *) echo "gpu-check: the configure did not link CUDA and NCCL: '${line#-- }'"; return 3 ;;
  esac
}
if [ -n "$TORCH_DIR" ]; then
  export STEPS TORCH_DIR
  export -f configure_step
  run_step configure 120 bash -c configure_step
  grep -E '^-- dtlab:|gpu-check:|CMake Error' "$STEPS/configure.out" | sed 's/^/   | /'
else
  record configure SKIP 0 "no torch"
fi

# 5. Build what the GPU suite and the benchmarks run, first: a lease on a GPU is short, and the
# GPU's own steps must not wait behind the other test programs. The rest of the kit is built
# last (step 10, build-rest), with what the budget has left. -k 0 builds all that can be built.
GPU_TARGETS=(gpu_test dtlab-fixtures task2b-solution task3-solution dp-solution bench_task1 bench_gpt2)
CONFIGURED=0
if [ -f "$BUILD/build.ninja" ] && grep -q "nccl=yes.*cuda=yes" "$STEPS/configure.cmake" 2>/dev/null; then
  CONFIGURED=1
fi
build_step() {  # NAME CAP TARGETS...
  local name="$1" cap="$2"
  shift 2
  if run_step "$name" "$cap" cmake --build "$BUILD" -j "$JOBS" --target "$@" -- -k 0; then
    tail_of "$name" 2
  elif [ -f "$STEPS/$name.out" ]; then
    grep -m 3 -A 12 "FAILED:" "$STEPS/$name.out" | sed 's/^/   | /'
    tail_of "$name" 3
  fi
}
if [ "$CONFIGURED" = 1 ]; then
  build_step build 300 "${GPU_TARGETS[@]}"
else
  record build SKIP 0 "the configure failed"
fi

# 6. The GPU tests.
if [ -f "$BUILD/CTestTestfile.cmake" ] && [ -f "$BUILD/build.ninja" ]; then
  run_step gpu-tests 150 bash -c "cd '$BUILD' && ctest -L gpu --output-on-failure --no-tests=error"
  tail_of gpu-tests 25
else
  record gpu-tests SKIP 0 "nothing built"
fi

# 7, 8. The step benchmarks on the GPU; their figures into the summary.
figures() {  # JSON FILE -> lines "model: s/iter, tokens/s, share of the peak"
  "$PYTHON" - "$1" <<'EOF' 2>/dev/null
import json, sys
j = json.load(open(sys.argv[1]))
peak = j.get("environment", {}).get("device", {}).get("nominal_peak", {})
for m in j["models"]:
    share = m.get("share_of_nominal_fp32_peak")
    print("{} {:<9} {:8.4f} s/iter {:>10.0f} tokens/s {:>9.1f} GFLOP/s  {}".format(
        j["benchmark"], m["model"], m["seconds_per_iteration"]["mean"], m["tokens_per_second"],
        m["gflops_per_second"],
        "{:.1f}% of {} fp32 {:g} TFLOP/s (nominal)".format(100 * share, peak.get("gpu", "?"), peak.get("fp32_tflops", 0))
        if share is not None else "no nominal peak for this GPU"))
EOF
}
bench_step() {  # NAME CAP PROGRAM ARGS...
  local name="$1" cap="$2" program="$3"
  shift 3
  if [ ! -x "$BUILD/bench/$program" ]; then
    record "$name" SKIP 0 "$program was not built"
    return
  fi
  rm -f "$BUILD/bench/${program}_cuda.json"
  run_step "$name" "$cap" "$BUILD/bench/$program" --device cuda --json "$BUILD/bench/${program}_cuda.json" "$@"
  [ -f "$STEPS/$name.out" ] && grep -vE '^\s*$' "$STEPS/$name.out" | sed 's/^/   | /'
  local f
  while IFS= read -r f; do FIGURES+=("$f"); done < <(figures "$BUILD/bench/${program}_cuda.json")
}
bench_step bench-gpt2 90 bench_gpt2
bench_step bench-task1 120 bench_task1 --iters 6 --base_iters 4

# 9. The kit's step against eager PyTorch on the same GPU (transformers needed).
if [ ! -x "$BUILD/bench/bench_gpt2" ]; then
  record eager SKIP 0 "bench_gpt2 was not built"
elif ! "$PYTHON" -c "import transformers" >/dev/null 2>&1; then
  record eager SKIP 0 "no transformers in $PYTHON's environment (tests/golden/setup_venv.sh --torch installs it)"
else
  run_step eager 150 "$PYTHON" bench/compare_eager.py --build "$BUILD" --bench gpt2 --models gpt2-mini,gpt2 \
    --rounds 2 --iters 6 --device cuda --json "$BUILD/bench/compare_eager_gpt2_cuda.json"
  tail_of eager 12
  while IFS= read -r f; do FIGURES+=("eager $f"); done < <(grep -sE "^gpt2(-mini)?: kit " "$STEPS/eager.out")
fi

# 10. The rest of the kit (every test program, the grader, the exercises): proves it compiles
# against this torch; not run (the CPU suite is CI's).
if [ "$CONFIGURED" = 1 ]; then
  build_step build-rest 600 all
else
  record build-rest SKIP 0 "the configure failed"
fi

# The summary.
{
  echo "gpu-check summary ($(date -u '+%Y-%m-%d %H:%M UTC'), $((SECONDS - START)) s of a ${BUDGET} s budget)"
  echo "  GPU     $(grep -c '^GPU [0-9]' <<<"$GPU_LIST") x ${GPU_NAME:-?}, driver ${DRIVER:-?}"
  echo "  torch   ${TORCH_VERSION:-?} (CUDA $(probe cuda), NCCL $(probe nccl)) from ${TORCH_DIR:-?}"
  echo "  commit  $(commit)"
  echo "  build   $BUILD ($(grep -E '^-- dtlab: C\+\+' "$STEPS/configure.cmake" 2>/dev/null | sed 's/^-- dtlab: //' | tail -1))"
  echo "  log     $LOG"
  echo "steps:"
  printf '  %s\n' "${STATUS_LINES[@]}"
  if [ ${#FIGURES[@]} -gt 0 ]; then
    echo "figures (FLOPs per step: 6 x parameters x tokens + attention; the peak is nominal, fp32):"
    printf '  %s\n' "${FIGURES[@]}"
  fi
  echo "result: $([ "$FAILED" = 0 ] && echo PASS || echo FAIL)"
} > "$SUMMARY"
echo ""
tee -a "$LOG" < "$SUMMARY"
exit "$FAILED"
