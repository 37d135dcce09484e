// run_glue.py's flags, see glue/options.h.
#include "dtlab/glue/options.h"

#include <CLI/CLI.hpp>

#include <filesystem>

#include "dtlab/core/error.h"
#include "dtlab/report/profile.h"

namespace dtlab::glue {

void add_glue_flags(CLI::App& app, GlueOptions& o, GlueMode mode) {
  app.add_option("--model_type", o.model_type, "Model type (bert)")->capture_default_str();
  app.add_option("--model_name_or_path", o.model_name_or_path,
                 "Hugging Face model folder: config.json, model.safetensors, vocab.txt")
      ->required();
  app.add_option("--task_name", o.task_name, "GLUE task (RTE)")->capture_default_str();
  app.add_option("--data_dir", o.data_dir, "Folder with the task's train.tsv and dev.tsv")->required();
  app.add_option("--output_dir", o.output_dir, "Where results.json and the fine-tuned model go")
      ->required();
  app.add_flag("--do_train", o.do_train, "Fine-tune on train.tsv");
  app.add_flag("--do_eval", o.do_eval, "Evaluate on dev.tsv (after every epoch when training)");
  app.add_flag("--overwrite_output_dir", o.overwrite_output_dir,
               "Allow an output_dir that is not empty");
  app.add_option("--max_seq_length", o.max_seq_length,
                 "Tokens per example after truncation and padding")->capture_default_str();
  app.add_option("--per_gpu_train_batch_size", o.per_gpu_train_batch_size,
                 "Training examples per minibatch on each rank")->capture_default_str();
  app.add_option("--per_gpu_eval_batch_size", o.per_gpu_eval_batch_size,
                 "Evaluation examples per batch")->capture_default_str();
  app.add_option("--learning_rate", o.learning_rate, "Peak AdamW learning rate")->capture_default_str();
  app.add_option("--weight_decay", o.weight_decay, "AdamW weight decay (not on biases, LayerNorm)")
      ->capture_default_str();
  app.add_option("--adam_epsilon", o.adam_epsilon, "AdamW epsilon")->capture_default_str();
  app.add_option("--max_grad_norm", o.max_grad_norm, "Gradient clipping norm (0: off)")
      ->capture_default_str();
  app.add_option("--num_train_epochs", o.num_train_epochs, "Epochs")->capture_default_str();
  app.add_option("--max_steps", o.max_steps, "Stop after this many steps if > 0")
      ->capture_default_str();
  app.add_option("--warmup_steps", o.warmup_steps, "Linear warmup steps")->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of initialisation, shuffling and dropout")
      ->capture_default_str();
  app.add_option("--dropout", o.dropout,
                 "Override every dropout probability of config.json (0 turns dropout off)");
  app.add_flag("--ignore_mismatched_sizes", o.ignore_mismatched_sizes,
               "Start afresh each checkpoint weight whose shape differs from the model's (a "
               "classifier trained for another label count), as transformers does");
  app.add_option("--threads", o.threads, "Intra-op threads (0: the cores available to this rank)")
      ->capture_default_str();
  app.add_option("--log_first_steps", o.log_first_steps,
                 "Print the loss of each of the first N minibatches")->capture_default_str();
  app.add_option("--progress_seconds", o.progress_seconds, "Seconds between progress lines")
      ->capture_default_str();
  app.add_flag("--no_save", o.no_save, "Do not write the fine-tuned model to output_dir");
  app.add_flag("--profile", o.profile, report::kProfileFlagHelp);
  app.add_option("--dump_dir", o.dump_dir,
                 "Grading aid: write each rank's parameters, synchronised gradients and data "
                 "shard at --dump_step to DIR/rank<r>.safetensors");
  app.add_option("--dump_step", o.dump_step, "The step --dump_dir records")->capture_default_str();
  if (mode == GlueMode::kSingle) {
    app.add_option("--train_order", o.train_order,
                   "Grading aid: a JSON array of training-set indices read in this order every "
                   "epoch instead of a shuffle")->check(CLI::ExistingFile);
    return;
  }
  dist::add_launch_flags(app, o.launch);
  app.add_option("--global_batch_size", o.global_batch_size,
                 "Examples per step over all ranks; each rank takes global / world_size "
                 "(default: --per_gpu_train_batch_size per rank)");
  app.add_flag("--init_seed_per_rank", o.init_seed_per_rank,
               "Testing aid: every rank draws different initial weights (seed + rank)");
  if (mode == GlueMode::kDdp) {
    app.add_option("--bucket_cap_mb", o.bucket_cap_mb, "DistributedDataParallel bucket cap in MB")
        ->capture_default_str();
  }
}

void validate(const GlueOptions& o) {
  namespace fs = std::filesystem;
  auto positive = [](long value, const char* flag) {
    if (value <= 0) throw Error(std::string(flag) + " must be positive, got " + std::to_string(value));
  };
  if (o.model_type != "bert") {
    throw Error("--model_type " + o.model_type + " is not supported: the kit provides bert");
  }
  if (!o.do_train && !o.do_eval) throw Error("nothing to do: give --do_train, --do_eval or both");
  positive(o.max_seq_length, "--max_seq_length");
  positive(o.per_gpu_train_batch_size, "--per_gpu_train_batch_size");
  positive(o.per_gpu_eval_batch_size, "--per_gpu_eval_batch_size");
  if (o.num_train_epochs <= 0 && o.max_steps <= 0) {
    throw Error("--num_train_epochs must be positive (or give --max_steps)");
  }
  if (o.dropout && !(*o.dropout >= 0 && *o.dropout < 1)) {
    throw Error("--dropout must be in [0, 1), got " + std::to_string(*o.dropout));
  }
  if (o.threads < 0) throw Error("--threads must not be negative");
  if (o.global_batch_size) positive(*o.global_batch_size, "--global_batch_size");
  positive(o.dump_step, "--dump_step");
  if (!(o.bucket_cap_mb > 0)) throw Error("--bucket_cap_mb must be positive");
  if (!fs::is_directory(o.model_name_or_path)) {
    throw Error("--model_name_or_path " + o.model_name_or_path + " is not a folder: give a "
                "Hugging Face BERT folder, or run dtlab-fixtures to make the offline one");
  }
  if (!fs::is_directory(o.data_dir)) {
    throw Error("--data_dir " + o.data_dir + " is not a folder: it must hold train.tsv and dev.tsv");
  }
}

}  // namespace dtlab::glue
