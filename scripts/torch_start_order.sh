#!/usr/bin/env bash
# Writes cmake/torch_start_order.txt: the libraries of Debian's LibTorch that the kit's programs
# name right after the C and C++ runtime, so that the loader finds their own symbols in a few
# probes instead of a hundred or more (Note [LibTorch's start order] in cmake/DtlabTorchStartOrder.cmake).
#   scripts/torch_start_order.sh [LIBTORCH_SO]    (default: Debian's libtorch.so.1.13)
#   scripts/torch_start_order.sh --check [LIBTORCH_SO]
# --check writes nothing: it recomputes the list and fails, saying why, unless the committed file
# is what this LibTorch gives (the same build id and the same libraries).
#
# The model: the loader resolves each symbolic relocation of every library (R_X86_64_64, GLOB_DAT,
# JUMP_SLOT; Debian links most of them -z now, so all at start) by walking the program's libraries
# in load order until one defines the symbol. A library's cost is the probes its relocations make:
# each relocation, the place of the library that answers it. Debian's libtorch_cpu.so.1.13 needs
# OpenCV, FFmpeg and through them GDAL, Xerces, GEOS, PROJ, Poppler...: 285 libraries, the big ones
# deep in the order, resolving their own symbols past a hundred others.
#
# What may move: a library is named early only if that changes no symbol's binding but between
# copies of one C++ entity (template instances, inline functions, vtables and type info: weak,
# unique and version symbols, which the C++ ABI treats as one). So a library that defines a symbol
# of any other kind (a function, a variable) that another library of the closure also defines is
# left where it is (the BLAS and LAPACK copies, GL, netCDF's own strlcat, ...). The list is ordered
# by relocations, most first, and holds those whose move saves at least $min_probes probes.
set -euo pipefail
export LC_ALL=C
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/cmake/torch_start_order.txt
check=0
if [[ ${1:-} == --check ]]; then
  check=1
  shift
fi
torch=${1:-/usr/lib/x86_64-linux-gnu/libtorch.so.1.13}
min_probes=100000
max_libraries=32
for tool in ldd nm readelf awk; do
  command -v "$tool" >/dev/null || { echo "torch_start_order: needs $tool" >&2; exit 2; }
done
[[ -f $torch ]] || { echo "torch_start_order: no $torch (Debian's libtorch-dev: scripts/setup.sh)" >&2; exit 2; }
cpu=$(dirname "$torch")/libtorch_cpu.so.$(basename "$torch" | sed 's/^libtorch\.so\.//')
[[ -f $cpu ]] || { echo "torch_start_order: no $cpu beside $torch" >&2; exit 2; }
build_id=$(readelf -n "$cpu" | awk '/Build ID:/ {print $3}')
[[ -n $build_id ]] || { echo "torch_start_order: $cpu has no build id" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The load order of a kit program: libtorch.so first, then what it needs, breadth first (ldd's order).
ldd "$torch" | awk '/=>/ && $3 ~ /^\// {print $3}' >"$tmp/closure"
{ echo "$torch"; cat "$tmp/closure"; } >"$tmp/order"
mapfile -t libraries <"$tmp/order"
nm -D --defined-only -A "${libraries[@]}" 2>/dev/null >"$tmp/defined" || true
readelf -rW "${libraries[@]}" 2>/dev/null >"$tmp/relocations" || true

awk -v min_probes="$min_probes" -v max_libraries="$max_libraries" '
  function base(path) { sub(/.*\//, "", path); return path }
  FILENAME == ARGV[1] { n++; lib[n] = base($0); place[lib[n]] = n; next }
  FILENAME == ARGV[2] {  # path:address type symbol
    split($1, a, ":"); l = base(a[1]); type = $2; s = $3; sub(/@.*/, "", s)
    if (!(s in first) || place[l] < place[first[s]]) first[s] = l
    if (type !~ /^[WVuA]$/ && s !~ /^(_edata|_end|__bss_start|_init|_fini)$/) {
      if ((s in strong) && strong[s] != l) { clash[l] = s; clash[strong[s]] = s }
      strong[s] = l
    }
    next
  }
  /^File: / { current = base($2); next }
  $3 ~ /^R_X86_64_(64|GLOB_DAT|JUMP_SLOT)$/ && $5 != "" {
    s = $5; sub(/@.*/, "", s); relocations[current]++; symbols[current, relocations[current]] = s
  }
  END {
    # The runtime every program names before anything else: C, C++, libm, libgcc_s, and LibTorch.
    split("libtorch.so.1.13 libtorch_cpu.so.1.13 libc10.so.1.13 libstdc++.so.6 libm.so.6 libgcc_s.so.1 libc.so.6", r, " ")
    for (i in r) runtime[r[i]] = 1
    for (i = 1; i <= n; i++) {
      l = lib[i]
      if ((l in runtime) || (l in clash)) continue
      probes = 0
      for (j = 1; j <= relocations[l]; j++) { s = symbols[l, j]; if ((s in first) && first[s] == l) probes += place[l] - 8 }
      if (probes >= min_probes) printf "%d %s %d\n", relocations[l], l, probes
    }
    for (l in clash) if (!(l in runtime) && relocations[l] > 1000) printf "left %s %s\n", l, clash[l] > "/dev/stderr"
  }' "$tmp/order" "$tmp/defined" "$tmp/relocations" 2>"$tmp/left" | sort -k1,1nr | head -n "$max_libraries" >"$tmp/chosen"

# The loader's own answer: a program that names only the runtime, and one that names the list
# after it, each run with every relocation bound at start (LD_BIND_NOW) and LD_DEBUG=bindings. Every
# binding that differs must be between copies of one C++ entity (weak, unique or version symbols in
# both libraries). A library moved early also moves the libraries it needs earlier (the order is
# breadth first): where that changes a binding of any other kind (netCDF's strlcat, once GDAL is
# early, would bind to netCDF's own copy instead of libbsd's), the library that answered before is
# named first, ahead of the list ("kept"), and the check runs again.
cc=${CC:-cc}
command -v "$cc" >/dev/null || { echo "torch_start_order: needs a C compiler ($cc; CC= names another)" >&2; exit 2; }
c10=$(awk '$1 ~ /^libc10\.so/ {print $3}' <(ldd "$torch"))
echo 'int main(void) { return 0; }' >"$tmp/probe.c"
where() { awk -v l="$1" '{p = $0; sub(/.*\//, "", p)} p == l {print; exit}' "$tmp/order"; }
# bindings NAME LIBRARY...: "file symbol library" for every binding of a program naming them.
bindings() {
  local name=$1
  shift
  "$cc" "$tmp/probe.c" -o "$tmp/$name" -Wl,--no-as-needed "$torch" "$cpu" "$c10" -lstdc++ -lm -lgcc_s -lc "$@"
  rm -f "$tmp/$name.log".*
  LD_BIND_NOW=1 LD_DEBUG=bindings LD_DEBUG_OUTPUT="$tmp/$name.log" "$tmp/$name"
  sed -nE "s/.*binding file ([^ ]+) \[0\] to ([^ ]+) \[0\]: normal symbol \`([^']+)'.*/\1 \3 \2/p" "$tmp/$name.log".* |
    awk '{sub(/.*\//, "", $1); sub(/.*\//, "", $3); print $1 "|" $2, $3}' | sort -u >"$tmp/$name.bindings"
}
bindings plain
awk '{print $2}' "$tmp/chosen" >"$tmp/names"
: >"$tmp/kept"
for round in 1 2 3 4 5 6; do
  mapfile -t paths < <(cat "$tmp/kept" "$tmp/names" | while read -r l; do where "$l"; done)
  bindings ordered "${paths[@]}"
  # file|symbol before after, for each binding that moved, but the program's own.
  join "$tmp/plain.bindings" "$tmp/ordered.bindings" | awk '$2 != $3 && $1 !~ /^(plain|ordered)\|/' >"$tmp/moved"
  awk 'FILENAME == ARGV[1] { split($1, a, ":"); l = a[1]; sub(/.*\//, "", l); s = $3; sub(/@.*/, "", s); type[l "|" s] = $2; next }
       { split($1, f, "|"); s = f[2]; sub(/@.*/, "", s)
         if (type[$2 "|" s] !~ /^[WVuA]$/ || type[$3 "|" s] !~ /^[WVuA]$/) print $2, s, $3 }' \
    "$tmp/defined" "$tmp/moved" | sort -u >"$tmp/strong"
  if [[ ! -s $tmp/strong ]]; then
    break
  fi
  if ((round == 6)); then
    echo "torch_start_order: the order still changes these bindings (library before, symbol, after):" >&2
    cat "$tmp/strong" >&2
    exit 1
  fi
  while read -r before symbol after; do
    grep -qx "$before" "$tmp/kept" || { echo "$before" >>"$tmp/kept"; echo "kept $before $symbol $after" >>"$tmp/left"; }
  done <"$tmp/strong"
done
moved=$(wc -l <"$tmp/moved")

{
  echo "# Written by scripts/torch_start_order.sh: Note [LibTorch's start order] (cmake/DtlabTorchStartOrder.cmake)."
  echo "# The libraries a kit program names right after the C and C++ runtime when it links this LibTorch,"
  echo "# in this order: each with its symbolic relocations and the probes its own symbols save by the move,"
  echo "# or 'kept' and the symbol whose binding it keeps. The build links them only where libtorch_cpu's"
  echo "# build id is this one. Bindings that move: $moved, each between copies of one C++ entity."
  echo "build-id $build_id"
  sed -n 's/^kept \([^ ]*\) \([^ ]*\) .*/\1 kept \2/p' "$tmp/left"
  awk '{print $2, $1, $3}' "$tmp/chosen"
} >"$tmp/list"

if ((check)); then
  if ! diff -u "$out" "$tmp/list"; then
    echo "torch_start_order: $out is not what $torch gives (above: - committed, + now); run scripts/torch_start_order.sh" >&2
    exit 1
  fi
  echo "torch_start_order: $out holds $(grep -vc '^#\|^build-id' "$out") libraries, as $torch gives"
  exit 0
fi
mv "$tmp/list" "$out.tmp"
mv "$out.tmp" "$out"
echo "torch_start_order: wrote $out: $(grep -vc '^#\|^build-id' "$out") libraries; left where they are for a symbol another library defines too:"
sed 's/^left /  left: /; s/^kept \([^ ]*\) \([^ ]*\) \(.*\)/  kept ahead: \1, whose \2 would otherwise bind to \3/' "$tmp/left"
