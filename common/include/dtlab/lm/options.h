// The command-line flags of the GPT-2 translation driver, parsed with CLI11: a model (a Hugging
// Face GPT-2 folder, or a named shape with random weights and a tokenizer folder), the
// translation data, training and evaluation settings.
#pragma once

#include <CLI/App.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dtlab/dist/settings.h"

namespace dtlab::lm {

struct LmOptions {
  // Exactly one of the two. A folder holds config.json, model.safetensors, vocab.json and
  // merges.txt; a preset (model/gpt2_config.h) is drawn from --seed with the tokenizer of
  // --tokenizer_dir and its vocabulary size.
  std::string model_name_or_path;
  std::string model_config;
  // With --model_config only: the preset's blocks (n_layer) replaced by this many, everything else
  // as the preset has it (bench_precision's layers; a pretrained folder's depth is its weights').
  std::optional<int64_t> n_layer;
  std::string tokenizer_dir;  // default: model_name_or_path
  std::string data_dir;       // train.jsonl, validation.jsonl, test.jsonl (data/translation.h)
  std::string output_dir;
  bool overwrite_output_dir = false;
  int64_t per_device_batch_size = 16;
  int64_t max_length = 128;  // tokens of a row before the one-token shift (make_lm_examples)
  double learning_rate = 1e-4;
  double weight_decay = 0.0;
  int64_t warmup_steps = 0;
  int num_epochs = 3;
  int64_t max_steps = -1;  // > 0: stop after this many steps (overrides num_epochs)
  uint64_t seed = 42;
  int threads = 0;               // 0: the cores available to this process
  double max_grad_norm = 1.0;    // <= 0 turns clipping off
  std::optional<double> dropout;  // overrides every dropout probability of the config
  bool no_eval = false;          // skip the evaluation after every epoch
  int64_t eval_batch_size = 64;
  int64_t bleu_examples = -1;    // test pairs translated per evaluation: -1 all, 0 no BLEU
  int64_t max_new_tokens = 64;   // per translation
  int samples = 3;               // translations printed after every evaluation
  int log_first_steps = 5;       // print the loss of each of the first N minibatches
  double progress_seconds = 10;  // then a progress line at most this often
  bool no_save = false;          // skip writing the trained model to output_dir
  bool profile = false;          // trace.json and profile.txt of steps 2-4 (report/profile.h)
  // Grading aids: every rank's parameters, synchronised gradients and examples at step 1
  // (train/rank_dump.h); one process only, the training set's examples in this order every
  // epoch instead of a fresh shuffle (a JSON array of indices: the union of the data-parallel
  // ranks' minibatches, in step order).
  std::string dump_dir;
  std::string train_order;

  // Data-parallel exercises only.
  dist::LaunchFlags launch;
  std::optional<int64_t> global_batch_size;  // per-rank batch = global / world size

  // The pipeline exercise only: GPT-2's layers on `stages` workers (1: the model as it is), the
  // batch in `micro_batches` (1: plain model parallelism), layers per stage (empty: balanced by
  // the kit, pipeline/gpt2_layout.h); probe: a grading aid that exercises the student's pipeline
  // on synthetic layers instead of training (common/exercises/pipeline/probe.cpp).
  int stages = 2;
  int micro_batches = 4;
  std::vector<int> balance;
  std::string probe;
  // The pp exercise (stages as ranks; --stages, --micro_batches and --balance as above, the
  // world made of pipelines of --stages ranks): "gpipe" or "1f1b".
  std::string schedule = "1f1b";
  int stage_sleep_ms = 0;  // grading aid: each stage action also sleeps (pipeline/stage_step.h)
  // The zero exercise: what is sharded. 1: the optimiser's state; 2: and the gradients.
  int zero_stage = 1;
  // The tp exercise: the ranks of one tensor-parallel group; the world is TP x DP (tp/grid.h).
  int tp = 2;
  // The cp exercise: the ranks of one context group (each holds 2 of 2 x CP chunks of every
  // sequence); the world is CP x DP. cp_block: the keys of one block of the attention;
  // cp_layout: "balanced" (rank r holds chunks r and 2CP - 1 - r) or "contiguous".
  int cp = 2;
  int cp_block = 64;
  std::string cp_layout = "balanced";
  // The mesh exercise: data x pipeline x tensor, the world's ranks / (--stages x --tp) replicas;
  // mesh_order: the axes slowest first (Note [The mesh's order] in mesh/layout.h; Megatron's
  // default); mesh_sizes: the sizes the grading aid --probe layout asks the layout about.
  std::string mesh_order = "pipeline,data,tensor";
  std::vector<int> mesh_sizes;
  // The precision exercise (dtlab/tasks/precision.h): every recompute_every-th block checkpointed (0:
  // none); precision fp32, bf16 (a bf16 compute copy of fp32 masters) or fp16 (fp16 gradients on
  // the wire); loss_scale dynamic or none (fp16 only), its first scale and the good steps before
  // it grows; inject_inf "STEP:RANK", a grading aid: an inf in that rank's fp16 gradients at
  // that step. --micro_batches (above) is the gradient accumulation's.
  int recompute_every = 0;
  std::string precision = "fp32";
  std::string loss_scale = "dynamic";
  double loss_scale_init = 65536;
  int64_t scale_growth_interval = 100;
  std::string inject_inf;
};

// Adds the flags to app; distributed adds the launch flags (--master_ip ...) and
// --global_batch_size.
void add_lm_flags(CLI::App& app, LmOptions& options, bool distributed = false);

// The pipeline exercise's flags: --stages, --micro_batches, --balance, --probe.
void add_pipeline_flags(CLI::App& app, LmOptions& options);

// The pp exercise's flags: --stages, --micro_batches, --balance, --schedule, and the grading aids
// --probe and --stage_sleep_ms.
void add_stage_rank_flags(CLI::App& app, LmOptions& options);

// The cp exercise's flags: --cp, --cp_block, --cp_layout.
void add_context_parallel_flags(CLI::App& app, LmOptions& options);

// The mesh exercise's flags: --stages, --tp, --micro_batches, --balance, --schedule, --mesh_order,
// --zero_stage (0 or 1; 0 unless given),
// and the grading aid's --mesh_sizes.
void add_mesh_flags(CLI::App& app, LmOptions& options);

// The memory exercise's flags: --recompute_every, --precision, --micro_batches, --loss_scale,
// --loss_scale_init, --scale_growth_interval and the grading aid --inject_inf (1 micro-batch
// unless given).
void add_precision_flags(CLI::App& app, LmOptions& options);

// Checks values CLI11 cannot (one model source, positive sizes, existing folders, a known
// preset), validate_counts included. Throws dtlab::Error naming the flag.
void validate(const LmOptions& options);

// The counts of the parallel axes (--stages, --micro_batches, --tp) and --stage_sleep_ms alone:
// what the grading probes read, which run without a model or data.
void validate_counts(const LmOptions& options);

// The folder the tokenizer files are read from: --tokenizer_dir, else --model_name_or_path.
std::string tokenizer_folder(const LmOptions& options);

}  // namespace dtlab::lm
