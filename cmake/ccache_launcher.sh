#!/bin/sh
# The compiler launcher of Note [Compiler cache] (cmake/DtlabCcache.cmake):
#   ccache_launcher.sh CCACHE BASE_DIR STATS_LOG COMPILER ARGS...
# runs COMPILER ARGS through CCACHE with the kit's settings, or straight when the environment
# says DTLAB_CCACHE=OFF (a build that must not touch the cache: the grader's submission builds).
ccache=$1 base_dir=$2 stats_log=$3
shift 3
case "${DTLAB_CCACHE:-ON}" in
  OFF | off | Off | 0 | NO | no | FALSE | false) exec "$@" ;;
esac
export CCACHE_BASEDIR="$base_dir" CCACHE_NOHASHDIR=1 CCACHE_STATSLOG="$stats_log" \
  CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
exec "$ccache" "$@"
