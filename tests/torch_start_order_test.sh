#!/usr/bin/env bash
# Note [LibTorch's start order] (cmake/DtlabTorchStartOrder.cmake): a kit program names the
# list's libraries right after the C and C++ runtime, in the list's order, and each is the very
# file Debian's libtorch_cpu.so loads anyway (the move adds no library to a program, it only
# changes where the loader meets it).
#   tests/torch_start_order_test.sh LIST PROGRAM LIBTORCH_CPU
set -euo pipefail
list=$1
program=$2
libtorch_cpu=$3
fail() { echo "torch_start_order_test: $*" >&2; exit 1; }
mapfile -t wanted < <(grep -v '^#\|^build-id' "$list" | awk '{print $1}')
((${#wanted[@]} > 0)) || fail "$list names no library"
mapfile -t needed < <(readelf -dW "$program" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]/\1/p')
at=-1
for i in "${!needed[@]}"; do
  [[ ${needed[$i]} == libc.so.6 ]] && at=$i
done
((at >= 0)) || fail "$program does not name libc.so.6"
after=("${needed[@]:at+1:${#wanted[@]}}")
[[ "${after[*]}" == "${wanted[*]}" ]] ||
  fail "$program names after libc.so.6: ${needed[*]:at+1}; the list (in order): ${wanted[*]}"
closure=$(ldd "$libtorch_cpu")
loaded=$(ldd "$program")
for soname in "${wanted[@]}"; do
  theirs=$(awk -v l="$soname" '$1 == l {print $3}' <<<"$closure")
  ours=$(awk -v l="$soname" '$1 == l {print $3}' <<<"$loaded")
  [[ -n $theirs ]] || fail "$soname is not one of the libraries $libtorch_cpu loads"
  [[ $(readlink -f "$ours") == $(readlink -f "$theirs") ]] || fail "$program loads $soname from '$ours', LibTorch from '$theirs'"
done
echo "torch_start_order_test: $(basename "$program") names ${#wanted[@]} libraries after the runtime, each LibTorch's own file"
