#!/usr/bin/env bash
# The lesson of tasks 2a, 2b and 3 on an emulated cluster, then the GPT-2 exercises dp, pp, zero, tp:
# the three ways of synchronising gradients timed on N network-namespace hosts of this machine
# (scripts/netns_hosts.sh) whose links are rate-limited in both directions, at several link rates
# and world sizes, with a BERT sized so that communication is a real part of a step (the model,
# below). On one machine over loopback compute and small-message latency decide, and
# gather/scatter through rank 0 can even look fastest; over a link of a real NIC's speed the star
# through rank 0 sends n times what the ring sends, and DDP hides part of the ring's time behind
# backward.
#
# Usage (root: namespaces, links, qdiscs):
#   sudo scripts/cluster_demo.sh [--out DIR] [--rates "1gbit 2500mbit 10gbit unlimited"]
#                                [--axes_rates "250mbit 1gbit 10gbit unlimited"]
#                                [--ranks "4 2"] [--steps 6] [--build build]
#                                [--parts "bert gpt2 zero axes mesh"]
# DIR (default out/grade, the grading's results folder) gets runs/cluster-<task>-<rate>-w<N>/
# (each rank's log, output/results.json, run.json with the rate) and cluster-fixtures/ (the
# model: BERT-base's width, 5 layers, the fixture's 662 words, sequence 8, global batch 8), and
# runs/cluster-dp-<rate>-w<N>/, runs/cluster-pp-<rate>-w<N>/ (gpt2-mini on the translation
# fixture; figure 12), runs/cluster-zero-<dp|1|2|3>-<rate>-w4/ (sharding; figure 14),
# runs/cluster-tp-<dp|pp|tp4|tp2>-<rate>-w4/ (the three axes at the axes' rates; figure 15),
# runs/cluster-mesh-<layout>-<rate>-w8/ (the mesh reference on 2 hosts of 4 ranks each; figure 17).
# --parts runs only the named parts (bert: tasks 2a, 2b, 3; gpt2: dp and pp; zero; axes; mesh).
# Prints one line per run: seconds per step, of it waiting for gradients; then, when DIR holds
# a grading (make demo), renders its report again, with figures 9, 12, 14 and 15 from these runs.
# The hosts are always torn down: at the end, on failure, on Ctrl-C or SIGTERM (and leftovers of a
# killed earlier run are removed first).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=out/grade
rates="1gbit 2500mbit 10gbit unlimited"
axes_rates="250mbit 1gbit 10gbit unlimited"
ranks_list="4 2"
steps=6
build=build
parts="bert gpt2 zero axes mesh"
readonly prefix=dtlabc  # its own prefix: never touches a rehearsal's dtlab-* hosts

die() {
  echo "cluster_demo: $*" >&2
  exit 2
}

while (($# > 0)); do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --rates) rates=$2; shift 2 ;;
    --axes_rates) axes_rates=$2; shift 2 ;;
    --ranks) ranks_list=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --parts) parts=$2; shift 2 ;;
    -h | --help) sed -n '2,27p' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done

((EUID == 0)) || die "needs root (network namespaces, links and rate limits): run it with sudo, e.g. sudo make cluster-demo"
[[ $steps =~ ^[1-9][0-9]*$ ]] || die "--steps must be a positive number, got '$steps'"
want() { [[ " $parts " == *" $1 "* ]]; }
for part in $parts; do
  [[ " bert gpt2 zero axes mesh " == *" $part "* ]] || die "--parts: unknown part '$part' (bert gpt2 zero axes mesh)"
done
for t in task2a task2b task3 dp pp zero tp mesh; do
  [[ -x $build/$t-solution ]] || die "$build/$t-solution is missing: run make build first"
done
[[ -x $build/tools/dtlab-fixtures ]] || die "$build/tools/dtlab-fixtures is missing: run make build first"

netns="$repo/scripts/netns_hosts.sh"
cleanup() { "$netns" down --prefix "$prefix" >/dev/null 2>&1 || true; }
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
cleanup  # what a killed earlier run left behind

# The model: BERT-base's layers (width 768, 12 heads, 7.1M parameters each), 5 of them, and the
# fixture's own 662-word vocabulary: 36.9M parameters, S = 148 MB of gradients a step, 96% of them
# in the layers. Sequence 8 and global batch 8 keep the computation small (about 0.3 s of a step
# at 4 hosts sharing 2 cores; at this size it is bound by the passes over the parameters' memory:
# reading the weights, writing their gradients, AdamW's one pass), so that at 1 Gbit/s the
# ring's 2(n-1)/n S per rank takes seven times the computation and the star's 2(n-1) S
# almost thirty times: 2b beats 2a by more than 3. BERT-base's 30522-word vocabulary would put 61%
# of the bytes in the word embeddings, whose gradient backward computes last, so DDP could hide
# almost nothing behind backward; in the layers, bucket after bucket leaves while backward goes on.
fixtures="$out/cluster-fixtures"
"$build/tools/dtlab-fixtures" --out "$fixtures" --hidden_size 768 --num_hidden_layers 5 \
  --num_attention_heads 12 >/dev/null
# The same training everywhere: on the emulated hosts and over loopback.
train_flags=(--model_name_or_path "$fixtures/bert-tiny" --data_dir "$fixtures/RTE" --do_train
  --max_seq_length 8 --global_batch_size 8 --max_steps "$steps" --dropout 0 --learning_rate 1e-4
  --seed 42 --no_save --overwrite_output_dir)

mkdir -p "$out/runs"
status=0
# One run of EXERCISE's reference on WORLD hosts at RATE ("unlimited": no limit) into
# runs/ID: each rank's log, output/results.json, run.json (what the report reads); prints its
# throughput line.
# ranks_per_host (1 unless set): the ranks each host runs, world = hosts x ranks_per_host.
ranks_per_host=1
run_on_hosts() {  # id exercise purpose hosts rate flags...
  local id=$1 exercise=$2 purpose=$3 hosts=$4 rate=$5
  shift 5
  local dir="$out/runs/$id" outcome=ok rate_flag=() line world=$((hosts * ranks_per_host))
  rm -rf "$dir"
  mkdir -p "$dir"
  [[ $rate == unlimited ]] || rate_flag=(--rate "$rate")
  if ! "$netns" run "$hosts" --ranks_per_host "$ranks_per_host" --prefix "$prefix" "${rate_flag[@]}" --logs "$dir" \
    --timeout 900 -- \
    "$build/$exercise-solution" "$@" --output_dir "$dir/output" \
    --master_ip '{master}' --world_size '{world}' --local_rank '{rank}' >"$dir/netns.log" 2>&1; then
    echo "cluster_demo: $id failed: see $dir/netns.log and $dir/rank*.log" >&2
    outcome=failed
    status=1
  fi
  printf '{"id": "%s", "exercise": "%s", "purpose": "%s", "world_size": %d, "rate": "%s", "outcome": "%s"}\n' \
    "$id" "$exercise" "$purpose" "$world" "$rate" "$outcome" >"$dir/run.json.partial"
  mv "$dir/run.json.partial" "$dir/run.json"
  line=$(grep -h '^throughput' "$dir/rank0.log" 2>/dev/null || true)
  printf '%-24s %s\n' "$id" "${line:-no timing (see $dir/rank0.log)}"
}
if want bert; then
for world in $ranks_list; do
  for rate in $rates; do
    for task in task2a task2b task3; do
      run_on_hosts "cluster-$task-$rate-w$world" "$task" cluster "$world" "$rate" "${train_flags[@]}"
    done
  done
done
# The network changes when gradients arrive, never what they are: each task's losses on the
# emulated hosts must equal the same run's over loopback, step for step (the printed 6 digits).
losses() { grep -ho 'step=[0-9]* epoch=[0-9]* loss=[0-9.]*' "$1" 2>/dev/null || true; }
for task in task2a task2b task3; do
  world=${ranks_list%% *}
  dir="$out/runs/cluster-$task-loopback-w$world"
  rm -rf "$dir"
  mkdir -p "$dir"
  port=$((20000 + RANDOM % 20000))
  "$repo/scripts/run_local_ranks.sh" "$world" "$dir" -- "$build/$task-solution" "${train_flags[@]}" \
    --output_dir "$dir/output" --master_ip 127.0.0.1 --master_port "$port" \
    --world_size "$world" --local_rank '{rank}' >"$dir/rank0.log" 2>&1 && outcome=ok || outcome=failed
  printf '{"id": "%s", "exercise": "%s", "purpose": "cluster-loopback", "world_size": %d, "outcome": "%s"}\n' \
    "cluster-$task-loopback-w$world" "$task" "$world" "$outcome" >"$dir/run.json"
  want=$(losses "$dir/rank0.log")
  for rate in $rates; do
    got=$(losses "$out/runs/cluster-$task-$rate-w$world/rank0.log")
    if [[ -n $want && $got == "$want" ]]; then
      echo "$task at $world hosts, $rate: losses equal the loopback run's, step for step"
    else
      echo "cluster_demo: $task at $world hosts, $rate: losses differ from the loopback run's ($dir/rank0.log)" >&2
      status=1
    fi
  done
done
fi

# The GPT-2 exercises on the same hosts (figure 12). dp: data parallel at 1, 2 and 4 hosts with
# the batch per host fixed (weak scaling), at the first rate: each host computes on its own share
# of this machine's cores (Group::ranks_on_this_machine divides them), so what the figure
# shows beyond that share is the network. pp: the pipeline across ranks, one stage per host, at 2
# and 4 hosts at that rate and unlimited: the unlimited run's step is the compute of the model
# "compute + boundary bytes / rate", and every rank's bytes per step are predicted from the
# boundaries' shapes and measured on its eth0 (Note [Bytes of a stage rank], pipeline/stage_ranks.cpp).
lm_rate=${rates%% *}
lm_flags=(--model_config gpt2-mini --tokenizer_dir "$fixtures/gpt2-tiny" --data_dir "$fixtures/translation"
  --max_steps "$steps" --no_eval --no_save --seed 42 --dropout 0 --overwrite_output_dir --log_first_steps 0)
if want gpt2; then
for world in 1 2 4; do
  run_on_hosts "cluster-dp-$lm_rate-w$world" dp cluster-dp "$world" "$lm_rate" "${lm_flags[@]}" \
    --global_batch_size $((8 * world))
done
for world in 2 4; do
  for rate in "$lm_rate" unlimited; do
    run_on_hosts "cluster-pp-$rate-w$world" pp cluster-pp "$world" "$rate" "${lm_flags[@]}" --stages "$world" \
      --micro_batches 8 --schedule 1f1b --batch_size 32
  done
done
fi

# Sharding (figure 14): dp and the zero reference at ZeRO-1, ZeRO-2 and FSDP on 4 hosts at every
# rate, 8 pairs per host: ZeRO-1 and 2 send what dp's all-reduce sends, FSDP 1.5 times that
# (Note [Bytes of a sharded step], shard/sharded_trainer.cpp), so the link rate at which FSDP's memory
# starts costing time shows. Each rank's bytes are measured on its eth0.
if want zero; then
for rate in $rates; do
  run_on_hosts "cluster-zero-dp-$rate-w4" dp cluster-zero 4 "$rate" "${lm_flags[@]}" --global_batch_size 32
  for stage in 1 2 3; do
    run_on_hosts "cluster-zero-$stage-$rate-w4" zero cluster-zero 4 "$rate" "${lm_flags[@]}" --global_batch_size 32 \
      --zero_stage "$stage"
  done
done
fi

# The three axes (figure 15): dp, pp (one stage a host) and tp at TP 4 and at TP 2 x DP 2 on 4 hosts
# at the axes' rates, a global batch of 32: tp's tensor groups all-reduce activations in every
# layer (Note [Bytes of a tensor-parallel step], tp/tp_trainer.h), so its step grows fastest as the
# link slows. The axes' rates reach below the others' (250 Mbit/s), where on this machine's shared
# cores the bytes, not the compute, decide.
if want axes; then
for rate in $axes_rates; do
  run_on_hosts "cluster-tp-dp-$rate-w4" dp cluster-tp 4 "$rate" "${lm_flags[@]}" --global_batch_size 32
  run_on_hosts "cluster-tp-pp-$rate-w4" pp cluster-tp 4 "$rate" "${lm_flags[@]}" --stages 4 --micro_batches 8 \
    --schedule 1f1b --batch_size 32
  for tp in 4 2; do
    run_on_hosts "cluster-tp-tp$tp-$rate-w4" tp cluster-tp 4 "$rate" "${lm_flags[@]}" --global_batch_size 32 --tp "$tp"
  done
done
fi

# The axes composed (figure 17): the mesh reference on 8 ranks as 2 hosts of 4 (a machine of 4
# devices on one NIC: the ranks of a host talk over its own loopback, unshaped; hosts over their
# shaped links), every layout that fits gpt2-mini's 4 heads, at the axes' rates, a global batch of 32
# in 4 micro-batches: data 8; pipeline 2 x tensor 4; 2 x 2 x 2; data 2 x tensor 4 with the tensor
# groups inside a host (Megatron's order) and across the hosts (--mesh_order tensor,data,pipeline).
# Each run predicts the bytes rank 0's host sends a step from the kit's own log (Note [The host
# link's bytes], mesh/mesh_trainer.h) beside what its eth0 counted.
if want mesh; then
ranks_per_host=4
for rate in $axes_rates; do
  for layout in "d8 1 1 pipeline,data,tensor" "p2t4 2 4 pipeline,data,tensor" "d2p2t2 2 2 pipeline,data,tensor" \
                "d2t4 1 4 pipeline,data,tensor" "d2t4across 1 4 tensor,data,pipeline"; do
    read -r name stages tp order <<<"$layout"
    run_on_hosts "cluster-mesh-$name-$rate-w8" mesh cluster-mesh 2 "$rate" "${lm_flags[@]}" --global_batch_size 32 \
      --stages "$stages" --tp "$tp" --micro_batches 4 --mesh_order "$order"
  done
done
ranks_per_host=1
fi

if [[ -f $out/results.json ]]; then
  "$build/grader/grader" report --results "$out" || status=1
else
  echo "cluster_demo: $out holds no grading (make demo writes one): the runs are in $out/runs; run make demo, then this, for the report with figure 9"
fi
exit $status
