#!/usr/bin/env bash
# fuzz/cpu_budget.sh BUDGET TARGET... (after fuzz/run.sh built build-fuzz/): fuzzes each target (in turn) until its process has used BUDGET
# CPU-seconds (user+system), then stops it with SIGINT (libFuzzer prints its final stats).
set -uo pipefail
cd "$(dirname "$0")/.."
budget=$1; shift
tck=$(getconf CLK_TCK)
for t in "$@"; do
  max_len=$(awk -v t="$t" '$1==t{print $2}' fuzz/targets.txt)
  mkdir -p build-fuzz/corpus/$t build-fuzz/artifacts
  log=build-fuzz/$t.round3.log
  build-fuzz/$t -max_len=$max_len -rss_limit_mb=2048 -timeout=10 -dict=fuzz/$t.dict \
    -artifact_prefix=build-fuzz/artifacts/$t- -max_total_time=3600 -print_final_stats=1 \
    build-fuzz/corpus/$t fuzz/corpus/$t > "$log" 2>&1 &
  pid=$!
  start=$SECONDS
  cpu=0
  while kill -0 $pid 2>/dev/null; do
    read -r -a f < /proc/$pid/stat 2>/dev/null || break
    cpu=$(( (f[13] + f[14]) / tck ))
    if [ "$cpu" -ge "$budget" ]; then kill -INT $pid; break; fi
    sleep 2
  done
  wait $pid; rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}')
  line=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -o 'cov: [0-9]* ft: [0-9]*')
  echo "$t cpu=${cpu}s wall=$((SECONDS-start))s execs=${execs:-?} ${line} rc=$rc"
done
