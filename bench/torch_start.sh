#!/usr/bin/env bash
# What Note [LibTorch's start order] (cmake/DtlabTorchStartOrder.cmake) saves at each start of a
# program that links Debian's LibTorch: two programs that do nothing (`int main() {}`), both linking
# LibTorch, one naming only the C and C++ runtime after it (LibTorch's own order), the other naming
# cmake/torch_start_order.txt's libraries after the runtime, as the kit's programs do. Each is run
# ROUNDS times, alternating, and the CPU seconds of each run (user + sys) printed: the minimum and
# the median of each, and the ratio of the medians. Both load the same 285 libraries.
#   bench/torch_start.sh [ROUNDS]    (make bench-start; ROUNDS: 20 unless given)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-20}
torch=/usr/lib/x86_64-linux-gnu/libtorch.so.1.13
list=$root/cmake/torch_start_order.txt
[[ -f $torch ]] || { echo "bench-start: no $torch (Debian's LibTorch: scripts/setup.sh)" >&2; exit 2; }
cpu=$(dirname "$torch")/libtorch_cpu.so.1.13
id=$(readelf -n "$cpu" | awk '/Build ID:/ {print $3}')
if [[ $(awk '$1 == "build-id" {print $2}' "$list") != "$id" ]]; then
  echo "bench-start: $list was made for another libtorch_cpu.so (this one's build id: $id); scripts/torch_start_order.sh remakes it" >&2
  exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
closure=$(ldd "$cpu")
c10=$(awk '$1 ~ /^libc10\.so/ {print $3}' <<<"$closure")
mapfile -t early < <(grep -v '^#\|^build-id' "$list" | while read -r soname _; do
  awk -v l="$soname" '$1 == l {print $3}' <<<"$closure"
done)
cc=${CC:-cc}
echo 'int main(void) { return 0; }' >"$tmp/probe.c"
"$cc" "$tmp/probe.c" -o "$tmp/torch-order" -Wl,--no-as-needed "$torch" "$cpu" "$c10" -lstdc++ -lm -lgcc_s -lc
"$cc" "$tmp/probe.c" -o "$tmp/kit-order" -Wl,--no-as-needed "$torch" "$cpu" "$c10" -lstdc++ -lm -lgcc_s -lc "${early[@]}"
# cpu_seconds PROGRAM: the CPU one run of it takes (bash's times of its children, before and after).
cpu_seconds() {
  local TIMEFORMAT='%U %S'
  { time "$1"; } 2>&1 | awk '{printf "%.3f\n", $1 + $2}'
}
for ((r = 0; r < rounds; r++)); do
  cpu_seconds "$tmp/torch-order" >>"$tmp/torch-order.s"
  cpu_seconds "$tmp/kit-order" >>"$tmp/kit-order.s"
done
stats() { sort -n "$1" | awk '{v[NR] = $1} END {printf "min %.3f s, median %.3f s", v[1], v[int((NR + 1) / 2)]}'; }
median() { sort -n "$1" | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
echo "bench-start: a start of a program linking $(basename "$torch"), CPU seconds over $rounds alternating rounds:"
echo "  LibTorch's own order:             $(stats "$tmp/torch-order.s")"
echo "  the kit's (${#early[@]} libraries early): $(stats "$tmp/kit-order.s")"
awk -v a="$(median "$tmp/torch-order.s")" -v b="$(median "$tmp/kit-order.s")" \
  'BEGIN {printf "  kit / LibTorch (medians): %.2f, %.0f ms less a start\n", b / a, (a - b) * 1000}'
