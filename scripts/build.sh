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
  case "${DTLAB_CCACHE:-ON}" in
    OFF | off | Off | 0 | NO | no | FALSE | false) echo "$build: built without the compiler cache (DTLAB_CCACHE=OFF)" ;;
    *)
      if grep -qs ccache_launcher "$build/CMakeFiles/rules.ninja" "$build/build.ninja"; then
        echo "$build: nothing compiled"
      else
        echo "$build: built without the compiler cache (no ccache when it was configured)"
      fi ;;
  esac
fi
exit $status
