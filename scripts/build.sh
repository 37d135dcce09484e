#!/usr/bin/env bash
# Builds a configured build folder and says how much of it came from the compiler cache
# (Note [Compiler cache] in cmake/DtlabCcache.cmake):
#   scripts/build.sh BUILD_DIR [cmake --build options...]
# The build's compiles are counted from BUILD_DIR/ccache-stats.log, emptied first, so the line is
# about this build alone even while other builds share the cache.
set -uo pipefail
build=$1
shift
log=$build/ccache-stats.log
rm -f "$log"
cmake --build "$build" "$@"
status=$?
if [[ -s $log ]] && command -v ccache >/dev/null; then
  # --show-log-stats prints "Hits: H / N (P%)" among its lines (ccache 4.6 and later).
  CCACHE_STATSLOG=$log ccache --show-log-stats | awk -v build="$build" '
    /^ *Hits:/ { hits = $2; total = $4 }
    /^ *Misses:/ { misses = $2 }
    /^ *Uncacheable calls:/ { uncacheable = $3 }
    END {
      if (total == "") total = hits + misses
      rate = total > 0 ? 100 * hits / total : 0
      note = (uncacheable > 0) ? sprintf(", %d not cacheable", uncacheable) : ""
      printf "%s: %d of %d compiles from the compiler cache (%.0f%%)%s\n", build, hits, total, rate, note
    }'
elif [[ $status -eq 0 ]]; then
  if grep -q ccache_launcher "$build/CMakeCache.txt" 2>/dev/null; then
    echo "$build: nothing compiled"
  else
    echo "$build: built without the compiler cache (DTLAB_CCACHE=OFF, or no ccache when it was configured)"
  fi
fi
exit $status
