// The GPT-2 driver's flags, see lm/options.h.
#include "dtlab/lm/options.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <filesystem>

#include "dtlab/core/error.h"
#include "dtlab/report/profile.h"
#include "dtlab/model/gpt2_config.h"

namespace dtlab::lm {
namespace fs = std::filesystem;

namespace {

void add_model_and_data_flags(CLI::App& app, LmOptions& o) {
  app.add_option("--model_name_or_path", o.model_name_or_path,
                 "Hugging Face GPT-2 folder: config.json, model.safetensors, vocab.json, merges.txt");
  app.add_option("--model_config", o.model_config,
                 "Instead of a folder: a GPT-2 shape (gpt2, gpt2-mini, gpt2-narrow) with random weights from "
                 "--seed and the vocabulary of --tokenizer_dir");
  app.add_option("--n_layer", o.n_layer,
                 "With --model_config: this many blocks instead of the preset's (its width, heads and the rest "
                 "as they are)");
  app.add_option("--tokenizer_dir", o.tokenizer_dir,
                 "Folder with vocab.json and merges.txt (default: --model_name_or_path)");
  app.add_option("--data_dir", o.data_dir, "Folder with train.jsonl, validation.jsonl, test.jsonl")
      ->required();
  app.add_option("--output_dir", o.output_dir, "Where results.json and the trained model go")
      ->required();
  app.add_flag("--overwrite_output_dir", o.overwrite_output_dir, "Allow an output_dir that is not empty");
}

void add_training_flags(CLI::App& app, LmOptions& o) {
  app.add_option("--per_device_batch_size,--batch_size", o.per_device_batch_size,
                 "Training pairs per minibatch on each rank")->capture_default_str();
  app.add_option("--max_length", o.max_length, "Tokens per row (source, <eos_de>, target, <eos_en>)")
      ->capture_default_str();
  app.add_option("--learning_rate", o.learning_rate, "Peak AdamW learning rate")->capture_default_str();
  app.add_option("--weight_decay", o.weight_decay, "AdamW weight decay (not on biases, LayerNorm)")
      ->capture_default_str();
  app.add_option("--warmup_steps", o.warmup_steps, "Linear warmup steps")->capture_default_str();
  app.add_option("--num_epochs", o.num_epochs, "Epochs")->capture_default_str();
  app.add_option("--max_steps", o.max_steps, "Stop after this many steps if > 0")->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of initialisation, shuffling and dropout")->capture_default_str();
  app.add_option("--threads", o.threads, "Intra-op threads (0: the cores available to this rank)")
      ->capture_default_str();
  app.add_option("--max_grad_norm", o.max_grad_norm, "Gradient clipping norm (0: off)")
      ->capture_default_str();
  app.add_option("--dropout", o.dropout, "Override every dropout probability of the config (0: off)");
  app.add_option("--log_first_steps", o.log_first_steps, "Print the loss of each of the first N minibatches")
      ->capture_default_str();
  app.add_option("--progress_seconds", o.progress_seconds, "Seconds between progress lines")
      ->capture_default_str();
  app.add_flag("--no_save", o.no_save, "Do not write the trained model to output_dir");
  app.add_flag("--profile", o.profile, report::kProfileFlagHelp);
  app.add_option("--dump_dir", o.dump_dir,
                 "Grading aid: write each rank's parameters, synchronised gradients and examples "
                 "at step 1 to DIR/rank<r>.safetensors");
}

void add_evaluation_flags(CLI::App& app, LmOptions& o) {
  app.add_flag("--no_eval", o.no_eval, "Skip the evaluation after every epoch (validation loss, BLEU)");
  app.add_option("--eval_batch_size", o.eval_batch_size, "Rows per evaluation and generation batch")
      ->capture_default_str();
  app.add_option("--bleu_examples", o.bleu_examples,
                 "Test pairs translated after every epoch for BLEU (-1: all, 0: no BLEU)")
      ->capture_default_str();
  app.add_option("--max_new_tokens", o.max_new_tokens, "Most tokens generated per translation")
      ->capture_default_str();
  app.add_option("--samples", o.samples, "Translations printed after every evaluation")
      ->capture_default_str();
}

void positive(int64_t value, const char* flag) {
  if (value <= 0) throw Error(std::string(flag) + " must be positive, got " + std::to_string(value));
}

void validate_model_source(const LmOptions& o) {
  if (o.model_name_or_path.empty() == o.model_config.empty()) {
    throw Error("give exactly one of --model_name_or_path (a Hugging Face GPT-2 folder) and "
                "--model_config (a preset with random weights, with --tokenizer_dir)");
  }
  if (!o.model_name_or_path.empty() && !fs::is_directory(o.model_name_or_path)) {
    throw Error("--model_name_or_path " + o.model_name_or_path + " is not a folder: give a Hugging "
                "Face GPT-2 folder, or run dtlab-fixtures to make fixtures/gpt2-tiny");
  }
  if (o.n_layer && o.model_config.empty()) {
    throw Error("--n_layer " + std::to_string(*o.n_layer) + " changes the depth of a preset drawn from --seed: it "
                "needs --model_config, not --model_name_or_path (a folder's depth is that of its weights)");
  }
  if (o.n_layer) positive(*o.n_layer, "--n_layer");
  if (!o.model_config.empty()) {
    try {
      model::Gpt2Config::preset(o.model_config);
    } catch (const Error& e) {
      throw Error(std::string("--model_config: ") + e.what());
    }
    if (o.tokenizer_dir.empty()) {
      throw Error("--model_config " + o.model_config + " needs --tokenizer_dir: a folder with "
                  "vocab.json and merges.txt (fixtures/gpt2-tiny has one)");
    }
  }
  if (!o.tokenizer_dir.empty() && !fs::is_directory(o.tokenizer_dir)) {
    throw Error("--tokenizer_dir " + o.tokenizer_dir + " is not a folder: it must hold vocab.json "
                "and merges.txt");
  }
}

}  // namespace

void add_lm_flags(CLI::App& app, LmOptions& o, bool distributed) {
  add_model_and_data_flags(app, o);
  add_training_flags(app, o);
  add_evaluation_flags(app, o);
  if (!distributed) {
    app.add_option("--train_order", o.train_order,
                   "Grading aid: a JSON array of training-set indices read in this order every "
                   "epoch instead of a shuffle")->check(CLI::ExistingFile);
    return;
  }
  dist::add_launch_flags(app, o.launch);
  app.add_option("--global_batch_size", o.global_batch_size,
                 "Pairs per step over all ranks; each rank takes global / world_size "
                 "(default: --per_device_batch_size per rank)");
}

void add_pipeline_flags(CLI::App& app, LmOptions& o) {
  app.add_option("--stages", o.stages, "Pipeline stages (workers) GPT-2's layers are split over; 1: the model as it is");
  app.add_option("--micro_batches", o.micro_batches,
                 "Micro-batches each batch is split into; 1: plain model parallelism");
  app.add_option("--balance", o.balance,
                 "Layers per stage, e.g. 3,3 (embeddings, blocks, head in order); default: balanced by the kit")
      ->delimiter(',');
  app.add_option("--probe", o.probe,
                 "Grading aid: instead of training, exercise the pipeline on synthetic layers and write "
                 "OUTPUT_DIR/results.json (schedule, split, transparency, concurrency, errors)")
      ->check(CLI::IsMember({"schedule", "split", "transparency", "concurrency", "errors"}));
}

void add_stage_rank_flags(CLI::App& app, LmOptions& o) {
  app.add_option("--stages", o.stages,
                 "Pipeline stages, one rank each; the world size must be a multiple (pipelines x stages, "
                 "the pipelines data parallel)");
  app.add_option("--micro_batches", o.micro_batches, "Micro-batches each pipeline's batch is split into");
  app.add_option("--balance", o.balance,
                 "Layers per stage, e.g. 3,3 (embeddings, blocks, head in order); default: balanced by the kit")
      ->delimiter(',');
  app.add_option("--schedule", o.schedule, "The pipeline schedule: gpipe (fill, drain) or 1f1b (PipeDream-flush)")
      ->check(CLI::IsMember({"gpipe", "1f1b"}));
  app.add_option("--probe", o.probe,
                 "Grading aid: instead of training, write every schedule the builders make (m, n in 1..8) to "
                 "OUTPUT_DIR/results.json")
      ->check(CLI::IsMember({"schedules"}));
  app.add_option("--stage_sleep_ms", o.stage_sleep_ms,
                 "Grading aid: every forward and backward of a stage also sleeps this many milliseconds, so that "
                 "the ranks' overlap shows whatever the machine's load");
}

void add_context_parallel_flags(CLI::App& app, LmOptions& o) {
  app.add_option("--cp", o.cp,
                 "Ranks of one context group (each holds 2 of 2 x CP chunks of every sequence); the world size must "
                 "be a multiple: CP x DP, the DP groups data parallel")
      ->capture_default_str();
  app.add_option("--cp_block", o.cp_block, "Keys per block of the attention (its scores are held a block at a time)")
      ->capture_default_str();
  app.add_option("--cp_layout", o.cp_layout,
                 "balanced: rank r holds chunks r and 2CP - 1 - r (equal work under the causal mask); contiguous: "
                 "chunks 2r and 2r + 1 (the figure's comparison)")
      ->capture_default_str();
}

void add_precision_flags(CLI::App& app, LmOptions& o) {
  o.micro_batches = 1;
  app.add_option("--recompute_every", o.recompute_every,
                 "Checkpoint every N-th block (blocks 0, N, 2N, ...): its activations recomputed in backward; 0: none")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--precision", o.precision,
                 "fp32; bf16: forward and backward on a bf16 copy of fp32 master weights; fp16: the gradients sent in "
                 "fp16 (the compute stays fp32 on the CPU)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  app.add_option("--micro_batches", o.micro_batches, "Micro-batches each rank's batch is split into (gradient accumulation)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--loss_scale", o.loss_scale,
                 "With --precision fp16: dynamic (the loss scaler) or none (fp16 gradients unscaled: what underflow costs)")
      ->capture_default_str()
      ->check(CLI::IsMember({"dynamic", "none"}));
  app.add_option("--loss_scale_init", o.loss_scale_init, "The loss scaler's first scale")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--scale_growth_interval", o.scale_growth_interval,
                 "Good steps in a row after which the loss scaler doubles its scale")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--inject_inf", o.inject_inf,
                 "Grading aid, STEP:RANK: an inf in that rank's fp16 gradients at that step (the scaler must skip it "
                 "on every rank)");
}

void add_mesh_flags(CLI::App& app, LmOptions& o) {
  app.add_option("--stages", o.stages, "Pipeline stages (the mesh's pipeline size)")->capture_default_str();
  app.add_option("--tp", o.tp, "Ranks of one tensor-parallel group (the mesh's tensor size)")->capture_default_str();
  app.add_option("--micro_batches", o.micro_batches, "Micro-batches each replica's batch is split into")
      ->capture_default_str();
  app.add_option("--balance", o.balance,
                 "Layers per stage, e.g. 3,3 (embeddings, blocks, head in order); default: balanced by the kit")
      ->delimiter(',');
  app.add_option("--schedule", o.schedule, "The pipeline schedule: gpipe (fill, drain) or 1f1b (PipeDream-flush)")
      ->check(CLI::IsMember({"gpipe", "1f1b"}))
      ->capture_default_str();
  app.add_option("--mesh_order", o.mesh_order,
                 "The mesh's axes slowest first, comma-separated (data, pipeline, tensor); consecutive ranks share "
                 "a host, so the last axis's groups stay inside one (Megatron's order puts tensor last)")
      ->capture_default_str();
  o.zero_stage = 0;  // the zero exercise's default is 1; the mesh averages whole gradients unless asked
  app.add_option("--zero_stage", o.zero_stage,
                 "1: ZeRO-1 over the data group (your tasks/zero's reduce-scatter and all-gather, AdamW's state "
                 "on 1/data of each rank's slices); 0: every replica averages and updates its whole slices")
      ->check(CLI::IsMember({0, 1}))
      ->capture_default_str();
  app.add_option("--mesh_sizes", o.mesh_sizes,
                 "Grading aid for --probe layout: the sizes of the mesh the layout is asked about, slowest first "
                 "(e.g. 3,2,4)")
      ->delimiter(',');
}

void validate_counts(const LmOptions& o) {
  // Checked here rather than by CLI11's PositiveNumber, which says "Value 0 not in range 0.000000
  // to 1.797...e308" (a double's range, for a count).
  positive(o.stages, "--stages");
  positive(o.micro_batches, "--micro_batches");
  positive(o.tp, "--tp");
  positive(o.cp, "--cp");
  positive(o.cp_block, "--cp_block");
  if (o.cp_layout != "balanced" && o.cp_layout != "contiguous") {
    throw Error("--cp_layout " + o.cp_layout + ": use balanced or contiguous");
  }
  if (o.stage_sleep_ms < 0) throw Error("--stage_sleep_ms must not be negative, got " + std::to_string(o.stage_sleep_ms));
}

void validate(const LmOptions& o) {
  validate_model_source(o);
  if (!fs::is_directory(o.data_dir)) {
    throw Error("--data_dir " + o.data_dir + " is not a folder: it must hold train.jsonl, "
                "validation.jsonl and test.jsonl (dtlab-fixtures writes fixtures/translation)");
  }
  positive(o.per_device_batch_size, "--per_device_batch_size");
  if (o.max_length < 2) {
    throw Error("--max_length must be at least 2 (a token and the one it predicts), got " +
                std::to_string(o.max_length));
  }
  if (!(o.learning_rate > 0)) throw Error("--learning_rate must be positive");
  if (!(o.weight_decay >= 0)) throw Error("--weight_decay must not be negative");
  if (o.warmup_steps < 0) throw Error("--warmup_steps must not be negative");
  if (o.num_epochs <= 0 && o.max_steps <= 0) {
    throw Error("--num_epochs must be positive (or give --max_steps)");
  }
  if (o.threads < 0) throw Error("--threads must not be negative");
  if (o.dropout && !(*o.dropout >= 0 && *o.dropout < 1)) {
    throw Error("--dropout must be in [0, 1), got " + std::to_string(*o.dropout));
  }
  positive(o.eval_batch_size, "--eval_batch_size");
  if (o.bleu_examples < -1) throw Error("--bleu_examples must be -1 (all), 0 (no BLEU) or positive");
  positive(o.max_new_tokens, "--max_new_tokens");
  if (o.samples < 0) throw Error("--samples must not be negative");
  if (o.global_batch_size) positive(*o.global_batch_size, "--global_batch_size");
  validate_counts(o);
  if (!o.balance.empty() && static_cast<int>(o.balance.size()) != o.stages) {
    throw Error(fmt::format("--balance lists {} stages and --stages is {}{}: give both the same number of stages",
                            o.balance.size(), o.stages, o.stages == LmOptions().stages ? " (its default)" : ""));
  }
}

std::string tokenizer_folder(const LmOptions& o) {
  return o.tokenizer_dir.empty() ? o.model_name_or_path : o.tokenizer_dir;
}

}  // namespace dtlab::lm
