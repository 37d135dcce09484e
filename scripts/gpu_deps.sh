#!/usr/bin/env bash
# The Debian packages the kit builds with, carried to a machine that has none of them (a GPU node
# with a torch venv, CMake, ninja and g++, but no apt and no network).
#
#   scripts/gpu_deps.sh                  here (Debian 12, apt): download their .deb files into
#                                        .gpu-deps/ (no root: apt-get download)
#   scripts/gpu_deps.sh --unpack PREFIX  there: unpack .gpu-deps/*.deb into PREFIX (dpkg -x; else ar
#                                        or Python, then tar), fix the paths the packages
#                                        hardcode, and print the CMake arguments and environment
#                                        that make the kit's configure find them there
#
# What the kit's configure asks for (CMakeLists.txt): find_package nlohmann_json, fmt, CLI11,
# GTest, and pkg_check_modules libutf8proc (so pkg-config itself too). The packages:
#   nlohmann-json3-dev, libcli11-dev   headers and CMake configs only
#   libfmt-dev + libfmt9               headers, CMake config, libfmt.so.9
#   libutf8proc-dev + libutf8proc2     header, libutf8proc.pc, libutf8proc.so.2
#   libgloo-dev                        Gloo's headers, which c10d's ProcessGroupGloo.hpp includes: a
#                                      torch wheel ships none (2.11's and 2.15's alike; seen on a GPU
#                                      machine, where the build stopped at <gloo/algorithm.h>); only
#                                      the headers are used, the wheel's libtorch holds Gloo itself
#   libgtest-dev                       headers, CMake config, static libgtest.a, libgtest_main.a
#                                      (googletest, its sources, and libgmock-dev are not needed)
#   pkgconf + pkgconf-bin + libpkgconf3  pkg-config, used only where the machine has none
# The CMake configs of these packages find their files relative to themselves (relocatable);
# the .pc files say prefix=/usr and are rewritten to PREFIX/usr. The shared libraries keep their
# folder (PREFIX/usr/lib/x86_64-linux-gnu), which CMake puts in the programs' build RPATH.
#
# --unpack writes, beside the unpacked tree:
#   PREFIX/cmake-args   the CMake arguments, one a line (also printed, on one line)
#   PREFIX/env.sh       `export` lines: PKG_CONFIG_LIBDIR, PATH (pkg-config), LD_LIBRARY_PATH
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEBS="${GPU_DEPS_DIR:-$REPO/.gpu-deps}"
PACKAGES=(libgloo-dev nlohmann-json3-dev libcli11-dev libfmt-dev libfmt9 libutf8proc-dev libutf8proc2 libgtest-dev
          pkgconf pkgconf-bin libpkgconf3)
MULTIARCH=x86_64-linux-gnu

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
}

download() {
  command -v apt-get >/dev/null || { echo "gpu_deps: apt-get not found: download on a Debian 12 machine" >&2; exit 2; }
  mkdir -p "$DEBS"
  rm -f "$DEBS"/*.deb
  # apt-get download writes into the current folder; as root, apt's sandbox user _apt cannot
  # write there, which is only a warning.
  # The versions this machine builds with where they are installed, else apt's candidates.
  local wanted=() p v
  for p in "${PACKAGES[@]}"; do
    v="$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || true)"
    wanted+=("$p${v:+=$v}")
  done
  (cd "$DEBS" || exit 1; apt-get download "${wanted[@]}" 2>&1 | grep -v "^W: Download is performed unsandboxed"; true)
  local missing=0
  for p in "${PACKAGES[@]}"; do
    if ! compgen -G "$DEBS/${p}_*.deb" >/dev/null; then
      echo "gpu_deps: $p was not downloaded (apt-get update first?)" >&2
      missing=1
    fi
  done
  [ "$missing" = 0 ] || exit 1
  (cd "$DEBS" && sha256sum ./*.deb > SHA256SUMS)
  echo "gpu_deps: $(find "$DEBS" -name '*.deb' | wc -l) packages in $DEBS, $(du -sh "$DEBS" | cut -f1) in all:"
  find "$DEBS" -name '*.deb' -printf '  %f\n' | sort
  echo "gpu_deps: carry .gpu-deps to the GPU machine, then: scripts/gpu_deps.sh --unpack PREFIX"
}

# One .deb into PREFIX: dpkg -x where dpkg exists, else ar (binutils) or Python, then tar.
extract() {
  local deb="$1" prefix="$2"
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$deb" "$prefix"
    return
  fi
  local tmp
  tmp="$(mktemp -d)"
  if command -v ar >/dev/null; then
    (cd "$tmp" && ar x "$deb")
  else
    # A .deb is an ar archive: 8-byte magic, then 60-byte headers, members padded to even sizes.
    python3 - "$deb" "$tmp" <<'EOF'
import os, sys
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"!<arch>\n", "not an ar archive"
pos = 8
while pos + 60 <= len(data):
    name = data[pos:pos + 16].decode().strip().rstrip("/")
    size = int(data[pos + 48:pos + 58].decode().strip())
    open(os.path.join(sys.argv[2], name), "wb").write(data[pos + 60:pos + 60 + size])
    pos += 60 + size + (size & 1)
EOF
  fi
  local member
  member="$(find "$tmp" -maxdepth 1 -name 'data.tar*' -printf '%f\n' | head -1)"
  [ -n "$member" ] || { echo "gpu_deps: $deb has no data.tar.*" >&2; rm -rf "$tmp"; exit 1; }
  case "$member" in
    *.xz) tar -xJf "$tmp/$member" -C "$prefix" ;;
    *.gz) tar -xzf "$tmp/$member" -C "$prefix" ;;
    *.zst) tar --zstd -xf "$tmp/$member" -C "$prefix" ;;
    *) tar -xf "$tmp/$member" -C "$prefix" ;;
  esac
  rm -rf "$tmp"
}

unpack() {
  local prefix="$1"
  compgen -G "$DEBS/*.deb" >/dev/null || {
    echo "gpu_deps: no .deb files in $DEBS: run scripts/gpu_deps.sh on a Debian 12 machine and carry .gpu-deps" >&2
    exit 1
  }
  mkdir -p "$prefix"
  prefix="$(cd "$prefix" && pwd)"
  if [ -f "$DEBS/SHA256SUMS" ] && command -v sha256sum >/dev/null; then
    (cd "$DEBS" && sha256sum --quiet -c SHA256SUMS) || { echo "gpu_deps: $DEBS: checksums differ" >&2; exit 1; }
  fi
  for deb in "$DEBS"/*.deb; do
    extract "$deb" "$prefix"
  done
  local usr="$prefix/usr" libdir="$prefix/usr/lib/$MULTIARCH"
  # The .pc files name /usr: point them at the prefix (pkg-config then hands CMake the prefix's
  # include and library folders).
  local pc
  for pc in "$libdir"/pkgconfig/*.pc "$usr"/share/pkgconfig/*.pc; do
    [ -f "$pc" ] || continue
    sed -i -e "s|^prefix=/usr\$|prefix=$usr|" -e "s|=/usr/|=$usr/|g" -e "s|-I/usr/|-I$usr/|g" \
           -e "s|-L/usr/|-L$usr/|g" "$pc"
  done
  # CMake configs that name /usr outside their "/usr move" check would use the system's files.
  local bad
  bad="$(grep -rlE '"/usr/(include|lib)' "$usr"/lib/$MULTIARCH/cmake "$usr"/share/cmake 2>/dev/null \
          | xargs -r grep -LE '_realOrig|/usr move' || true)"
  if [ -n "$bad" ]; then
    echo "gpu_deps: these CMake files name /usr and are not relocatable; fixing:" >&2
    while IFS= read -r f; do echo "  $f"; done <<<"$bad" >&2
    echo "$bad" | xargs -r sed -i -e "s|\"/usr/|\"$usr/|g"
  fi

  # pkg-config: the machine's own where it has one, else the unpacked pkgconf (it runs where the
  # machine's glibc is at least Debian 12's needs: 2.34).
  local pkg_config=""
  if command -v pkg-config >/dev/null; then
    pkg_config="$(command -v pkg-config)"
  elif [ -x "$usr/bin/pkgconf" ] && LD_LIBRARY_PATH="$libdir" "$usr/bin/pkgconf" --version >/dev/null 2>&1; then
    # libpkgconf.so.3 is in the prefix: a wrapper sets the library path for pkgconf alone.
    mkdir -p "$prefix/bin"
    cat > "$prefix/bin/pkg-config" <<EOF
#!/bin/sh
LD_LIBRARY_PATH="$libdir\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$usr/bin/pkgconf" "\$@"
EOF
    chmod +x "$prefix/bin/pkg-config"
    pkg_config="$prefix/bin/pkg-config"
  else
    echo "gpu_deps: no pkg-config on this machine, and the unpacked pkgconf does not run here" >&2
    exit 1
  fi
  local pc_libdir="$libdir/pkgconfig:$usr/share/pkgconfig"
  # The arguments: the prefix first, the system's /usr and /usr/local ignored for packages
  # (CMAKE_IGNORE_PREFIX_PATH, CMake >= 3.23; older CMake ignores it and finds the prefix first
  # anyway, as CMAKE_PREFIX_PATH is searched before the system folders).
  {
    echo "-DCMAKE_PREFIX_PATH=$usr"
    echo "-DCMAKE_IGNORE_PREFIX_PATH=/usr;/usr/local"
    echo "-DPKG_CONFIG_EXECUTABLE=$pkg_config"
  } > "$prefix/cmake-args"
  cat > "$prefix/env.sh" <<EOF
# scripts/gpu_deps.sh --unpack $prefix: source this before configuring and running the kit.
export PKG_CONFIG_LIBDIR="$pc_libdir"
export PKG_CONFIG_PATH=""
export LD_LIBRARY_PATH="$libdir\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
EOF
  if [ "${QUIET:-0}" != 1 ]; then
    echo "gpu_deps: $(find "$DEBS" -name '*.deb' | wc -l) packages unpacked into $prefix"
    echo "gpu_deps: configure with these CMake arguments (also in $prefix/cmake-args):"
    echo "  $(sed "s/.*/'&'/" "$prefix/cmake-args" | tr '\n' ' ')"
    echo "gpu_deps: and this environment (source $prefix/env.sh): PKG_CONFIG_LIBDIR=$pc_libdir;"
    echo "  LD_LIBRARY_PATH=$libdir is only needed by programs whose RPATH lacks it (CMake's build RPATH has it)"
  fi
}

case "${1:-}" in
  "") download ;;
  --unpack)
    [ -n "${2:-}" ] || { echo "gpu_deps: --unpack PREFIX: name the folder to unpack into" >&2; exit 2; }
    unpack "$2" ;;
  -h|--help) usage ;;
  *) echo "gpu_deps: unknown argument $1 (--unpack PREFIX, --help)" >&2; exit 2 ;;
esac
