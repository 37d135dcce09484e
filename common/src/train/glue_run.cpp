// The GLUE fine-tuning driver: one readable path from flags to results.json, on one process
// (task 1) or on every rank of a data-parallel run (tasks 2a, 2b, 3).
#include "dtlab/train/glue_run.h"

#include <CLI/CLI.hpp>
#include <torch/utils.h>
#include <torch/version.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/data/sampler.h"
#include "dtlab/io/file.h"
#include "dtlab/model/bert.h"
#include "dtlab/report/results.h"
#include "dtlab/report/timing.h"
#include "dtlab/tokenizer/bert_tokenizer.h"
#include "dtlab/train/rank_dump.h"
#include "dtlab/train/runtime.h"
#include "dtlab/train/step.h"

namespace fs = std::filesystem;

namespace dtlab::train {
namespace {

nlohmann::json options_json(const GlueOptions& o, int64_t per_rank_batch, int world) {
  return {{"model_type", o.model_type},
          {"model_name_or_path", o.model_name_or_path},
          {"task_name", o.task_name},
          {"data_dir", o.data_dir},
          {"output_dir", o.output_dir},
          {"do_train", o.do_train},
          {"do_eval", o.do_eval},
          {"max_seq_length", o.max_seq_length},
          {"per_rank_train_batch_size", per_rank_batch},
          {"global_train_batch_size", per_rank_batch * world},
          {"per_gpu_eval_batch_size", o.per_gpu_eval_batch_size},
          {"learning_rate", o.learning_rate},
          {"weight_decay", o.weight_decay},
          {"adam_epsilon", o.adam_epsilon},
          {"max_grad_norm", o.max_grad_norm},
          {"num_train_epochs", o.num_train_epochs},
          {"max_steps", o.max_steps},
          {"warmup_steps", o.warmup_steps},
          {"seed", o.seed},
          {"dropout", o.dropout ? nlohmann::json(*o.dropout) : nlohmann::json()},
          {"bucket_cap_mb", o.bucket_cap_mb},
          {"init_seed_per_rank", o.init_seed_per_rank}};
}

int64_t count_parameters(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

std::string duration(double seconds) {
  const long s = std::lround(seconds);
  return fmt::format("{}:{:02d}", s / 60, s % 60);
}

// The fine-tuned model goes next to a copy of the tokenizer files, as run_glue saves it, so the
// output folder is itself a model folder.
void save_model_folder(const model::BertForSequenceClassification& model, const fs::path& from,
                       const fs::path& to) {
  model::save_pretrained(model, to);
  for (const char* file : {"vocab.txt", "tokenizer_config.json", "special_tokens_map.json"}) {
    if (fs::exists(from / file)) io::write_file_atomically(to / file, io::read_file(from / file));
  }
}

// Evaluation split over the ranks: rank r reads dev examples r, r + world, ... and the counts
// are summed, so no rank waits for another to evaluate the whole set.
EvalResult evaluate_distributed(model::BertForSequenceClassification& model,
                                const data::Features& dev, int64_t batch, dist::Group& group) {
  std::vector<int64_t> mine;
  for (int64_t i = group.rank(); i < dev.size(); i += group.size()) mine.push_back(i);
  double correct = 0, loss_sum = 0;
  if (!mine.empty()) {
    const data::Batch rows = data::make_batch(dev, mine);
    const data::Features part{rows.input_ids, rows.attention_mask, rows.token_type_ids, rows.labels};
    const EvalResult r = evaluate(model, part, batch);
    correct = std::round(r.accuracy * double(r.examples));
    loss_sum = r.loss * double(r.examples);
  }
  torch::Tensor sums = torch::tensor({correct, loss_sum, double(mine.size())}, torch::kFloat64);
  group.all_reduce(sums, dist::ReduceOp::SUM, "eval");
  const double n = sums[2].item<double>();
  return {n ? sums[0].item<double>() / n : 0.0, n ? sums[1].item<double>() / n : 0.0,
          static_cast<int64_t>(n)};
}

nlohmann::json communication_json(const dist::Group& group, dist::DistributedDataParallel* ddp) {
  nlohmann::json by_tag = nlohmann::json::object();
  for (const dist::CommRecord& r : const_cast<dist::Group&>(group).log().records()) {
    // "ddp bucket 3" -> "ddp bucket": one line per kind of traffic.
    std::string tag = r.tag.rfind("ddp bucket", 0) == 0 ? "ddp bucket" : r.tag;
    const std::string key = r.op + (tag.empty() ? "" : " / " + tag);
    auto& entry = by_tag[key];
    if (entry.is_null()) entry = {{"calls", 0}, {"bytes", int64_t{0}}, {"seconds", 0.0}};
    entry["calls"] = entry.value("calls", 0) + 1;
    entry["bytes"] = entry.value("bytes", int64_t{0}) + r.bytes;
    entry["seconds"] = entry.value("seconds", 0.0) + r.seconds;
  }
  nlohmann::json j = {{"by_operation", by_tag}};
  if (ddp) {
    nlohmann::json buckets = nlohmann::json::array();
    for (const auto& b : ddp->buckets()) buckets.push_back({{"parameters", b.parameters.size()}, {"bytes", b.bytes}});
    j["ddp_buckets"] = buckets;
  }
  return j;
}

}  // namespace

int run_glue(const GlueOptions& o, const GlueExercise& ex) {
  const bool distributed = ex.mode != GlueMode::kSingle;

  // Who this process is. Flags are checked before any rank waits for another.
  dist::Settings settings;
  if (distributed) settings = dist::resolve_settings(o.launch, dist::launcher_environment());
  const bool lead = settings.rank == 0;
  validate(o);
  if (lead && o.do_train && fs::is_directory(o.output_dir) && !fs::is_empty(o.output_dir) &&
      !o.overwrite_output_dir) {
    throw Error("--output_dir " + o.output_dir + " already exists and is not empty: use "
                "--overwrite_output_dir to overwrite it");
  }
  std::unique_ptr<dist::Group> group;
  if (distributed) {
    group = ex.setup(settings);
    if (!group) throw Error(ex.name + ": setup returned no process group");
  }
  const int rank = group ? group->rank() : 0, world = group ? group->size() : 1;
  const int threads = configure_threads(o.threads, group ? group->local_world_size() : 1);

  // Data: examples as run_glue reads them, tokenised once.
  const fs::path model_dir = o.model_name_or_path, data_dir = o.data_dir;
  const data::GlueTask task = data::glue_task(o.task_name);
  const tokenizer::BertTokenizer tokenizer = tokenizer::BertTokenizer::from_pretrained(model_dir);
  data::Features train_set, dev_set;
  if (o.do_train) {
    train_set = data::convert_examples_to_features(
        data::read_rte_examples(data_dir / "train.tsv", "train"), tokenizer, o.max_seq_length);
  }
  if (o.do_eval) {
    dev_set = data::convert_examples_to_features(
        data::read_rte_examples(data_dir / "dev.tsv", "dev"), tokenizer, o.max_seq_length);
  }

  // The batch: a global batch is split evenly over the ranks (DESIGN: it stays fixed as ranks
  // are added).
  int64_t batch = o.per_gpu_train_batch_size;
  if (o.global_batch_size) {
    if (*o.global_batch_size % world != 0) {
      throw Error("--global_batch_size " + std::to_string(*o.global_batch_size) +
                  " is not divisible by the world size " + std::to_string(world));
    }
    batch = *o.global_batch_size / world;
  }

  // Model: the same weights on every rank (unless a test asks otherwise).
  torch::manual_seed(o.seed + (o.init_seed_per_rank ? static_cast<uint64_t>(rank) : 0));
  model::BertOverrides overrides;
  if (o.dropout) overrides = model::BertOverrides::dropout(*o.dropout);
  overrides.num_labels = static_cast<int64_t>(task.labels.size());
  model::LoadReport load_report;
  TrainState state;
  state.model = ex.load_model ? ex.load_model(model_dir, overrides, &load_report)
                              : model::from_pretrained(model_dir, overrides, &load_report);
  if (!state.model) throw Error(ex.name + ": load_model returned no model");
  const model::BertConfig& config = state.model->config();
  if (tokenizer.vocab_size() > config.vocab_size) {
    throw Error((model_dir / "vocab.txt").string() + " has " +
                std::to_string(tokenizer.vocab_size()) + " tokens but config.json's vocab_size is " +
                std::to_string(config.vocab_size));
  }
  if (ex.broadcast_parameters) ex.broadcast_parameters(*state.model, *group);
  std::unique_ptr<dist::DistributedDataParallel> ddp;
  if (ex.mode == GlueMode::kDdp) {
    dist::DdpOptions ddp_options;
    ddp_options.bucket_cap_bytes = static_cast<int64_t>(o.bucket_cap_mb * 1024 * 1024);
    ddp = ex.wrap_model(state.model.ptr(), *group, ddp_options);
    if (!ddp) throw Error(ex.name + ": wrap_model returned no DistributedDataParallel");
  }
  torch::manual_seed(o.seed);  // dropout draws the same on every rank, as in run_glue

  // Optimiser and schedule, as run_glue sets them up.
  const data::SamplerOptions sampler = distributed
      ? ex.make_sampler(train_set.size(), *group, o.seed)
      : data::SamplerOptions{train_set.size(), 1, 0, /*shuffle=*/true, o.seed};
  const int64_t shard = o.do_train ? (train_set.size() + world - 1) / world : 0;
  const int64_t steps_per_epoch = (shard + batch - 1) / batch;
  const int64_t total_steps = o.max_steps > 0 ? o.max_steps : steps_per_epoch * o.num_train_epochs;
  const int epochs = o.max_steps > 0 && steps_per_epoch > 0
                         ? static_cast<int>((o.max_steps + steps_per_epoch - 1) / steps_per_epoch)
                         : o.num_train_epochs;
  state.max_grad_norm = o.max_grad_norm;
  state.optimizer = make_adamw(*state.model, {o.learning_rate, o.weight_decay, o.adam_epsilon});
  state.scheduler = std::make_unique<LinearWarmupSchedule>(*state.optimizer, o.warmup_steps, total_steps);
  int evaluations = 0;
  state.evaluate = [&] {
    ++evaluations;
    return group ? evaluate_distributed(state.model, dev_set, o.per_gpu_eval_batch_size, *group)
                 : evaluate(state.model, dev_set, o.per_gpu_eval_batch_size);
  };

  // The kit's step, with the exercise's synchronisation (distributed exercises and the
  // reference run); task 1 brings its own train_step.
  const bool kit_step = distributed || !ex.train_step;
  if (!o.dump_dir.empty() && !kit_step) {
    throw Error("--dump_dir: " + ex.name + " uses its own train_step; the dump needs the kit's step");
  }
  double comm_seconds = 0;
  int64_t step = 0;
  std::vector<int64_t> shard_of_epoch1, batch_indices;
  auto sync = [&] {
    if (ex.sync_gradients) {
      report::Stopwatch watch;
      ex.sync_gradients(*state.model, *group);
      comm_seconds = watch.seconds();
    }
    if (!o.dump_dir.empty() && step + 1 == o.dump_step) {
      write_rank_dump(o.dump_dir, *state.model,
                      {rank, world, o.dump_step, batch * world, shard_of_epoch1, batch_indices});
    }
  };
  auto kit_train_step = [&](const data::Batch& b) {
    const float loss = data_parallel_step(state, b, sync);
    if (ddp) comm_seconds = ddp->last_wait_seconds();  // the part that did not overlap backward
    return loss;
  };

  const BlasInfo blas = detect_blas();
  const nlohmann::json environment = {
      {"hostname", host_name()}, {"libtorch", TORCH_VERSION}, {"blas", blas.name},
      {"blas_library", blas.path}, {"threads", threads}, {"world_size", world},
      {"backend", group ? nlohmann::json(group->backend()) : nlohmann::json()},
      {"launcher", settings.source},
      {"ranks_on_this_host", group ? group->local_world_size() : 1}};
  report::Results results(ex.name, options_json(o, batch, world), environment);
  const fs::path results_path = fs::path(o.output_dir) / "results.json";

  if (lead) {
    fmt::print("dtlab {}\n", ex.name);
    fmt::print("  model       {} (L{} H{} A{}, {:.2f}M parameters)\n", o.model_name_or_path,
               config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
               count_parameters(*state.model) / 1e6);
    fmt::print("  data        {}: {} train, {} dev examples, max_seq_length {}\n", o.data_dir,
               train_set.size(), dev_set.size(), o.max_seq_length);
    if (o.do_train) {
      fmt::print("  training    batch {} x {} rank{} = {}, {} epochs, {} steps, AdamW lr {:g} wd {:g}, "
                 "warmup {}, clip {:g}, dropout {}\n",
                 batch, world, world == 1 ? "" : "s", batch * world, epochs, total_steps,
                 o.learning_rate, o.weight_decay, o.warmup_steps, o.max_grad_norm,
                 o.dropout ? fmt::format("{:g}", *o.dropout) : "from config.json");
    } else {
      fmt::print("  training    off (evaluation only)\n");
    }
    if (group) {
      fmt::print("  ranks       {} ({}), backend {}, master {}:{}, timeout {:g} s{}\n", world,
                 settings.source, group->backend(), settings.master_addr, settings.master_port,
                 settings.timeout.count() / 1000.0,
                 ddp ? fmt::format(", {} DDP buckets (cap {:g} MB)", ddp->buckets().size(), o.bucket_cap_mb) : "");
    }
    fmt::print("  runtime     {}\n", describe_runtime());
    std::fputs(load_report.describe(model_dir.string()).c_str(), stdout);
    std::fflush(stdout);
  }

  report::Stopwatch since_start, since_progress;
  for (int epoch = 1; epoch <= epochs && o.do_train && step < total_steps; ++epoch) {
    report::Stopwatch epoch_time;
    std::vector<report::IterationRecord> records;
    const std::vector<int64_t> shard = data::shard_indices(sampler, epoch - 1);
    if (epoch == 1) shard_of_epoch1 = shard;
    for (const auto& indices : data::minibatches(shard, batch)) {
      if (step >= total_steps) break;
      batch_indices = indices;
      const data::Batch b = data::make_batch(train_set, indices);
      const double lr = state.scheduler->last_lr();
      report::Stopwatch step_time;
      comm_seconds = 0;
      float loss = kit_step ? kit_train_step(b) : ex.train_step(state, b);
      const double seconds = step_time.seconds();
      ++step;
      if (!std::isfinite(loss)) {
        throw Error(fmt::format("rank {}: the loss is {} at step {}: lower --learning_rate or "
                                "check the data", rank, loss, step));
      }
      records.push_back({step, epoch, loss, seconds, lr, b.size() * world, b.real_tokens() * world,
                         comm_seconds});
      if (step <= o.log_first_steps) {
        if (group) {  // print the loss of the global batch: the mean over ranks
          torch::Tensor l = torch::tensor({loss}, torch::kFloat32);
          group->all_reduce(l, dist::ReduceOp::AVG_BY_DIVISION, "loss");
          loss = l.item<float>();
        }
        if (lead) {
          fmt::print("step={} epoch={} loss={:.6f} lr={:.3e} seconds={:.3f}\n", step, epoch, loss, lr, seconds);
          std::fflush(stdout);
        }
      } else if (lead && since_progress.seconds() >= o.progress_seconds) {
        const double per_step = since_start.seconds() / double(step);
        double sum = 0;
        for (const auto& r : records) sum += r.loss;
        fmt::print("progress step={}/{} epoch={}/{} loss_avg={:.4f} seconds_per_step={:.3f} eta={}\n",
                   step, total_steps, epoch, epochs, sum / double(records.size()), per_step,
                   duration(per_step * double(total_steps - step)));
        std::fflush(stdout);
        since_progress.restart();
      }
    }
    // The loss of each step over the whole global batch: the mean of the ranks' losses.
    if (group && !records.empty()) {
      torch::Tensor losses = torch::empty({static_cast<int64_t>(records.size())}, torch::kFloat64);
      for (size_t i = 0; i < records.size(); ++i) losses[i] = records[i].loss;
      group->all_reduce(losses, dist::ReduceOp::AVG_BY_DIVISION, "loss");
      for (size_t i = 0; i < records.size(); ++i) records[i].loss = losses[i].item<double>();
    }
    double loss_sum = 0;
    for (const auto& r : records) {
      results.add(r);
      loss_sum += r.loss;
    }
    report::EpochRecord record;
    record.epoch = epoch;
    record.train_loss = records.empty() ? 0.0 : loss_sum / double(records.size());
    if (o.do_eval) {
      const int before = evaluations;
      const EvalResult r = ex.after_epoch ? ex.after_epoch(state, epoch) : state.evaluate();
      if (evaluations == before) {
        throw Error(ex.name + ": after_epoch did not evaluate the model (call state.evaluate())");
      }
      record.eval_accuracy = r.accuracy;
      record.eval_loss = r.loss;
      record.eval_examples = r.examples;
    }
    record.seconds = epoch_time.seconds();
    results.add(record);
    if (lead) {
      fmt::print("epoch={} train_loss={:.4f}", epoch, record.train_loss);
      if (record.eval_accuracy) {
        fmt::print(" eval_accuracy={:.4f} eval_loss={:.4f} eval_examples={}", *record.eval_accuracy,
                   *record.eval_loss, record.eval_examples);
      }
      fmt::print(" seconds={:.1f}\n", record.seconds);
      std::fflush(stdout);
      results.save(results_path);
    }
  }
  if (!o.do_train && o.do_eval) {
    const EvalResult r = state.evaluate();
    report::EpochRecord record;
    record.eval_accuracy = r.accuracy;
    record.eval_loss = r.loss;
    record.eval_examples = r.examples;
    results.add(record);
    if (lead) fmt::print("eval_accuracy={:.4f} eval_loss={:.4f} eval_examples={}\n", r.accuracy, r.loss, r.examples);
  }
  if (group) results.set_section("communication", communication_json(*group, ddp.get()));
  if (lead) {
    results.save(results_path);
    if (o.do_train && !o.no_save) save_model_folder(state.model, model_dir, o.output_dir);
    fmt::print("results: {}\n", results_path.string());
  }
  return kExitOk;
}

int glue_main(int argc, char** argv, const GlueExercise& exercise) {
  return run_main(exercise.name.c_str(), [&]() -> int {
    GlueOptions options;
    CLI::App app{"dtlab " + exercise.name + ": fine-tune BERT on a GLUE task (run_glue.py's flags)"};
    add_glue_flags(app, options, exercise.mode);
    if (auto stop = parse_flags(app, argc, argv)) return *stop;
    return run_glue(options, exercise);
  });
}

}  // namespace dtlab::train
