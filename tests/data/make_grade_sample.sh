#!/usr/bin/env bash
# Makes tests/data/grade-sample: a small, real grading results folder in the layout `grader check`
# writes (results.json + runs/<run-id>/{run.json,results.json}), from the reference solutions run
# on the fixtures. report_test renders it; people can look at its report to judge the figures.
#
# Usage (from anywhere, after building): tests/data/make_grade_sample.sh [BUILD_DIR] [OUT_DIR]
#   defaults: build/ and tests/data/grade-sample/ of this repo. Takes about 2 minutes on 2 cores.
# Ranks run as local processes on 127.0.0.1, ports 29720.. (one per run). The rank logs and the
# per-rank output folders stay in a scratch folder that is removed; only rank 0's results.json is
# kept, stored compactly (one line) to keep the committed folder small.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
out=${2:-$repo/tests/data/grade-sample}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cores=$(nproc)
port=29720

common=(--model_name_or_path "$repo/fixtures/bert-tiny" --data_dir "$repo/fixtures/RTE" --task_name RTE
        --max_seq_length 64 --seed 42 --dropout 0 --no_save --overwrite_output_dir)
train=(--do_train --global_batch_size 32 --max_steps 40)

json_array() {  # the arguments as a JSON array of strings
  printf '%s\n' "$@" | jq -R . | jq -sc .
}

# run ID EXERCISE PURPOSE WORLD BINARY ARGS...: starts WORLD ranks of BINARY in the background,
# waits for all, then stores run.json and rank 0's results.json under $out/runs/ID.
run() {
  local id=$1 exercise=$2 purpose=$3 world=$4 binary=$5
  shift 5
  local dir=$out/runs/$id threads=$(( cores / world > 0 ? cores / world : 1 ))
  local args=("$build/$binary" "${common[@]}" "$@" --threads "$threads")
  [[ $binary != task1-solution ]] &&
    args+=(--master_ip 127.0.0.1 --master_port "$port" --world_size "$world")
  port=$((port + 1))
  mkdir -p "$dir"
  local start pids=() outcome=ok r
  start=$(date +%s.%N)
  for ((r = 0; r < world; r++)); do
    local rank_args=("${args[@]}" --output_dir "$scratch/$id/rank$r")
    [[ $binary != task1-solution ]] && rank_args+=(--local_rank "$r")
    "${rank_args[@]}" > "$scratch/$id-rank$r.log" 2>&1 &
    pids+=($!)
  done
  for r in "${!pids[@]}"; do wait "${pids[r]}" || outcome=failed; done
  local seconds
  seconds=$(echo "$(date +%s.%N) - $start" | bc)
  local command=("${args[@]}" --output_dir "$scratch/$id/rank0")
  [[ $binary != task1-solution ]] && command+=(--local_rank 0)
  # Paths in the record are made relative to the repo so the folder does not name this machine's.
  jq -n --arg id "$id" --arg exercise "$exercise" --arg purpose "$purpose" --argjson world "$world" \
     --arg outcome "$outcome" --argjson seconds "$(printf '%.2f' "$seconds")" \
     --argjson command "$(json_array "${command[@]}" | sed "s|$repo/||g; s|$scratch|OUT|g")" \
     '{id: $id, exercise: $exercise, purpose: $purpose, world_size: $world, outcome: $outcome,
       seconds: $seconds, command: $command}' > "$dir/run.json"
  if [[ $outcome == ok ]]; then
    # The reference run is task 1's binary: relabel it as the kit's own single-process run.
    jq -c --arg exercise "$exercise" '.exercise = $exercise' "$scratch/$id/rank0/results.json" |
      sed "s|$repo/||g; s|$scratch|OUT|g" > "$dir/results.json"
  fi
  echo "$id: $outcome (${seconds%.*} s)"
}

rm -rf "$out"
mkdir -p "$out/runs"
began=$(date +%s.%N)

run reference-w1 reference reference 1 task1-solution --do_train --per_gpu_train_batch_size 32 --max_steps 40
for task in task2a task2b task3; do
  for world in 1 2 4; do
    run "$task-timing-w$world" "$task" timing "$world" "$task-solution" "${train[@]}"
  done
  run "$task-losses-w4" "$task" losses 4 "$task-solution" "${train[@]}"
done
for cap in 0.1 0.25 1 5 25; do
  run "task3-bucket-cap$cap-w2" task3 bucket-sweep 2 task3-solution "${train[@]}" --bucket_cap_mb "$cap"
done
# One whole epoch per batch size (no --max_steps): the bytes per epoch are what task 4 asks about.
run task4-traffic-w4 task4 traffic 4 task4-solution --batch_sizes 64,32,16

# The top-level results.json in Gradescope's format. Scores are computed from the runs above, the
# way `grader check` would: a run that finished, and for the losses runs the largest difference
# from the reference run's losses.
elapsed=$(echo "$(date +%s.%N) - $began" | bc)
commit=$(git -C "$repo" rev-parse --short HEAD)
dirty=$([[ -n $(git -C "$repo" status --porcelain) ]] && echo true || echo false)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
python3 - "$out" "$elapsed" "$commit" "$dirty" "$cpu" "$cores" "$(hostname)" <<'EOF'
import json, sys, pathlib, datetime
out, elapsed, commit, dirty, cpu, cores, host = sys.argv[1:]
runs = {p.parent.name: json.loads(p.read_text()) for p in pathlib.Path(out, "runs").glob("*/run.json")}
def results(run_id):
    p = pathlib.Path(out, "runs", run_id, "results.json")
    return json.loads(p.read_text()) if p.exists() else None
ref = [i["loss"] for i in results("reference-w1")["iterations"]]
tests = []
def test(name, ok, points, output):
    tests.append({"name": name, "score": points if ok else 0, "max_score": points,
                  "status": "passed" if ok else "failed", "output": output})
for task in ("task2a", "task2b", "task3"):
    for world in (1, 2, 4):
        run = runs[f"{task}-timing-w{world}"]
        test(f"{task}: trains with {world} rank{'s' if world > 1 else ''}", run["outcome"] == "ok", 5,
             f"finished in {run['seconds']:.1f} s")
    losses = [i["loss"] for i in results(f"{task}-losses-w4")["iterations"]]
    diff = max(abs(a - b) for a, b in zip(losses, ref))
    test(f"{task}: losses match single-process training (4 ranks)",
         len(losses) == len(ref) and diff < 1e-4, 10,
         f"largest |loss - reference| over {len(losses)} steps: {diff:.2e} (tolerance 1e-4)")
sweep = [r for r in runs.values() if r["purpose"] == "bucket-sweep"]
test("task3: bucket-cap sweep runs", all(r["outcome"] == "ok" for r in sweep), 5,
     f"{len(sweep)} bucket caps")
traffic = results("task4-traffic-w4")["traffic"]
worst = max(abs(t["ratio_measured_to_expected"] - 1) for t in traffic)
test("task4: measured traffic within 5% of expected", worst < 0.05, 10,
     f"largest |measured/expected - 1|: {worst:.4f}")
score = sum(t["score"] for t in tests)
top = {"score": score, "max_score": sum(t["max_score"] for t in tests),
       "execution_time": round(float(elapsed), 1),
       "output": f"{sum(t['status'] == 'passed' for t in tests)} of {len(tests)} checks passed",
       "tests": tests,
       "extra_data": {"provenance": {
           "commit": commit, "dirty": dirty == "true", "libtorch": results("reference-w1")["environment"]["libtorch"],
           "backend": "gloo", "hostname": host, "cpu": cpu, "cores": int(cores),
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "seed": 42, "submission": "reference solutions (tests/data/make_grade_sample.sh)"}}}
pathlib.Path(out, "results.json").write_text(json.dumps(top, indent=2) + "\n")
EOF
echo "wrote $out ($(du -sh "$out" | cut -f1))"
