#!/usr/bin/env bash
# Installs the Debian packages dtlab builds and runs with, when any is missing, and points the
# system BLAS at OpenBLAS. Safe to run again: with everything in place it only checks.
# Usage: scripts/setup.sh [--with-real-text] [--torch [VERSION]] [--fuzz] [--asan]
#
# --torch [VERSION]: also installs PyPI's torch (default: the pinned version below) into the
# project-local venv .torch/venv, from the machine's copy in ~/.cache/dtlab (Note [The machine's
# copy of torch] below; DTLAB_TORCH_CACHE moves it), for
# `make test TORCH=pip` (Note [Which LibTorch] in cmake/DtlabTorch.cmake). The pin moves by
# editing torch_pin below, then `./scripts/setup.sh --torch && make test TORCH=pip`; a difference
# the new version brings goes into common/include/dtlab/core/libtorch_compat.h.
# The download (about 3.5 GB: torch and the CUDA runtime wheels it depends on) happens here and
# only here: no build or test downloads anything.
#
# Why each package:
#   g++ make cmake ninja-build pkg-config   the build
#   clang-14                                the kit's compiler: its precompiled header makes each
#                                           LibTorch unit about 4 s cheaper than GCC's (Note [Clang
#                                           for the kit], cmake/DtlabCompiler.cmake); also the
#                                           compiler of `make asan` and of the fuzz harnesses
#   libtorch-dev                            LibTorch 1.13 (C++ frontend, autograd, c10d with Gloo)
#   libgloo-dev                             Gloo headers that c10d's ProcessGroupGloo.hpp includes
#   libopenblas0-openmp                     fast matrix products for LibTorch (see below)
#   libcli11-dev                            command-line flags
#   nlohmann-json3-dev                      config.json, safetensors headers, results.json
#   libfmt-dev                              formatted output
#   libutf8proc-dev                         Unicode categories and normalisation for the tokenizer
#   libgtest-dev                            the test suites
#   gnuplot-nox fonts-liberation            the report's figures (SVG through cairo), with a
#                                           clean sans-serif font
#   git                                     provenance of every grade (the commit) and the
#                                           student release (the tracked files)
#   bubblewrap                              the grader's sandbox for student code (Note [The
#                                           sandbox] in grader/sandbox.h): namespaces without root
# Only with --torch:
#   python3-venv                            the project-local venv that holds PyPI's torch
# Only with --fuzz or --asan:
#   libclang-rt-14-dev                      libFuzzer and the sanitizers' runtime, for `make
#                                           fuzz` and `make fuzz-replay` (docs/FUZZING.md), and
#                                           `make asan` and `make asan-unit` (docs/SANITIZERS.md)
# Only with --with-real-text:
#   trans-de-en                             the Ding German-English dictionary, whose example
#                                           sentences dtlab-translation-data turns into a real
#                                           translation set offline (25 MB; nothing else needs it)
#
# Why OpenBLAS's OpenMP build: Debian's LibTorch calls the system libblas.so.3, which on a fresh
# machine is the reference BLAS, many times slower on the matrix products that dominate a
# transformer. LibTorch parallelises with OpenMP; OpenBLAS's OpenMP build shares that thread
# pool and runs single-threaded inside LibTorch's parallel regions, where the pthreads build
# would start a second pool that competes with OpenMP's threads for the same cores.
set -euo pipefail

packages=(g++ clang-14 make cmake ninja-build pkg-config libtorch-dev libopenblas0-openmp libcli11-dev
          libgloo-dev nlohmann-json3-dev libfmt-dev libutf8proc-dev libgtest-dev
          gnuplot-nox fonts-liberation git bubblewrap ccache)

# The LibTorch 2.x that CI tests beside Debian's 1.13. Move the pin here (and nowhere else).
torch_pin=2.15.0
torch_version=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --with-real-text) packages+=(trans-de-en) ;;
    --fuzz|--asan) packages+=(libclang-rt-14-dev) ;;
    --torch)
      torch_version=$torch_pin
      if [[ $# -gt 1 && "$2" =~ ^[0-9]+\.[0-9]+(\.[0-9]+)?$ ]]; then torch_version=$2; shift; fi
      packages+=(python3-venv) ;;
    *) echo "setup: unknown option $1 (the options are --with-real-text, --torch [VERSION], --fuzz and --asan)" >&2; exit 2 ;;
  esac
  shift
done

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null; then
    sudo "$@"
  else
    echo "setup: need root to run: $*" >&2
    echo "setup: run this script as root, or install: ${missing[*]}" >&2
    exit 1
  fi
}

if [[ ${#missing[@]} -gt 0 ]]; then
  echo "setup: installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Select OpenBLAS (OpenMP) for libblas.so.3 and liblapack.so.3, whatever else is installed.
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
for lib in libblas.so.3 liblapack.so.3; do
  want=/usr/lib/$arch/openblas-openmp/$lib
  now=$(readlink -f "/usr/lib/$arch/$lib" || true)
  if [[ -e "$want" && "$now" != "$(readlink -f "$want")" ]]; then
    echo "setup: selecting $want for $lib"
    as_root update-alternatives --quiet --set "$lib-$arch" "$want"
  fi
done
echo "setup: all dtlab packages are installed; BLAS: $(readlink -f "/usr/lib/$arch/libblas.so.3")"

# PyPI's torch in .torch/venv, when asked for and not already there at that version.
# Note [The machine's copy of torch]: pip installs torch==VERSION once per machine, into
# TORCH_CACHE/torch-VERSION (a venv of its own, renamed into place only once complete, so a
# failed or concurrent install never leaves half of one); each clone's .torch/venv is then a
# fresh venv whose site-packages are hard links to that copy's (a copy where they are on
# different file systems). A fresh clone thus pays seconds, not the minute pip takes to unpack
# 3.5 GB of wheels, and the install itself still runs, on any machine that lacks it. Nothing in a
# clone's venv writes through to the machine's copy: pip replaces a file rather than writing
# into it, and the venv's own scripts name the clone's python.
if [[ -n "$torch_version" ]]; then
  repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  venv=$repo_root/.torch/venv
  have=$(cat "$venv/torch-version" 2>/dev/null || true)
  if [[ "$have" != "$torch_version" ]]; then
    torch_cache=${DTLAB_TORCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dtlab}
    machine_copy=$torch_cache/torch-$torch_version
    if [[ ! -f "$machine_copy/torch-version" ]]; then
      echo "setup: installing torch==$torch_version from PyPI into $machine_copy (once per machine)"
      mkdir -p "$torch_cache"
      staging=$(mktemp -d "$torch_cache/.torch-$torch_version.XXXXXX")
      trap 'rm -rf "$staging"' EXIT
      /usr/bin/python3 -m venv "$staging"
      "$staging/bin/python" -m pip install --quiet --disable-pip-version-check "torch==$torch_version"
      echo "$torch_version" > "$staging/torch-version"
      # Another setup may have finished the same copy meanwhile: its copy stays, ours goes.
      mv -T "$staging" "$machine_copy" 2>/dev/null || true
      rm -rf "$staging"
      trap - EXIT
    fi
    echo "setup: torch $torch_version into $venv (from the machine's copy, $machine_copy)"
    rm -rf "$venv"
    /usr/bin/python3 -m venv --without-pip "$venv"  # pip comes with the copy
    site=$(cd "$machine_copy" && echo lib/python3*/site-packages)
    cp -a --link --remove-destination "$machine_copy/$site/." "$venv/$site/" 2>/dev/null ||
      cp -a --remove-destination "$machine_copy/$site/." "$venv/$site/"
    echo "$torch_version" > "$venv/torch-version"
  fi
  echo "setup: torch $torch_version in $venv: build and test with make test TORCH=pip"
fi
