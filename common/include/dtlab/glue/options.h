// The command-line flags of run_glue.py that the GLUE exercises take, parsed with CLI11.
#pragma once

#include <CLI/App.hpp>

#include <optional>
#include <string>

#include "dtlab/dist/settings.h"

namespace dtlab::glue {

struct GlueOptions {
  std::string model_type = "bert";
  std::string model_name_or_path;
  std::string task_name = "RTE";
  std::string data_dir;
  std::string output_dir;
  bool do_train = false;
  bool do_eval = false;
  bool overwrite_output_dir = false;
  int max_seq_length = 128;
  int per_gpu_train_batch_size = 8;
  int per_gpu_eval_batch_size = 8;
  double learning_rate = 5e-5;
  double weight_decay = 0.0;
  double adam_epsilon = 1e-8;
  double max_grad_norm = 1.0;
  int num_train_epochs = 3;
  long max_steps = -1;  // > 0: stop after this many steps (overrides num_train_epochs)
  int warmup_steps = 0;
  uint64_t seed = 42;
  std::optional<double> dropout;  // overrides every dropout probability of config.json
  bool ignore_mismatched_sizes = false;  // a checkpoint weight of another shape starts afresh
  int threads = 0;                // 0: the cores available to this process
  int log_first_steps = 5;        // print the loss of each of the first N minibatches
  double progress_seconds = 10;   // then a progress line at most this often
  bool no_save = false;           // skip writing the fine-tuned model to output_dir
  bool profile = false;           // trace.json and profile.txt of steps 2-4 (report/profile.h)

  // Grading aid: at step dump_step, every rank writes DIR/rank<r>.safetensors with its
  // parameters (before that step's update), its gradients after synchronisation (before
  // clipping) and the examples it reads (see train/rank_dump.h). Needs the kit's step.
  std::string dump_dir;
  int dump_step = 1;
  // Grading aid of a single process (train/train_order.h): the training examples read in this
  // order (a JSON array of indices), unshuffled, every epoch.
  std::string train_order;

  // Distributed exercises only.
  dist::LaunchFlags launch;
  std::optional<int> global_batch_size;  // per-rank batch = global / world size
  double bucket_cap_mb = 25;             // task 3: DDP bucket cap
  bool init_seed_per_rank = false;       // testing aid: each rank draws different initial weights
};

// Which flags a GLUE binary takes: one process (task 1), data parallel (2a, 2b), data parallel
// with DDP's --bucket_cap_mb (3, 4). It chooses flags only; the loop has no modes.
enum class GlueMode { kSingle, kDistributed, kDdp };

// Adds the flags to app, with run_glue's names and defaults; distributed modes add the launch
// flags (--master_ip ...) and --global_batch_size, kDdp also --bucket_cap_mb.
void add_glue_flags(CLI::App& app, GlueOptions& options, GlueMode mode = GlueMode::kSingle);

// Checks values CLI11 cannot (positive sizes, an existing model folder, an output folder that
// may be written). Throws dtlab::Error naming the flag.
void validate(const GlueOptions& options);

}  // namespace dtlab::glue
