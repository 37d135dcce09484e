// The GLUE fine-tuning driver, see glue/run.h: one readable path from flags to results.json,
// on one process (task 1, the reference) or on every rank of a data-parallel run (2a, 2b, 3).
#include "dtlab/glue/run.h"

#include <CLI/CLI.hpp>

#include <cstdio>

#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/glue/evaluate.h"
#include "dtlab/glue/parts.h"
#include "dtlab/io/file.h"
#include "dtlab/model/flops.h"
#include "dtlab/report/process_memory.h"
#include "dtlab/report/tensor_bytes.h"
#include "dtlab/report/results.h"
#include "dtlab/train/loop.h"
#include "dtlab/train/rank_dump.h"
#include "dtlab/train/runtime.h"
#include "dtlab/train/train_order.h"

namespace fs = std::filesystem;

namespace dtlab::glue {
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

// The fine-tuned model goes next to a copy of the tokenizer files, as run_glue saves it, so the
// output folder is itself a model folder.
void save_model_folder(const model::BertForSequenceClassification& model, const fs::path& from,
                       const fs::path& to) {
  model::save_pretrained(model, to);
  for (const char* file : {"vocab.txt", "tokenizer_config.json", "special_tokens_map.json"}) {
    if (fs::exists(from / file)) io::write_file_atomically(to / file, io::read_file(from / file));
  }
}

// Bytes, calls and seconds of every kind of operation this rank issued, and the strategy's own
// details (DDP's buckets).
nlohmann::json communication_json(dist::Group& group, const train::GradientSync& sync) {
  nlohmann::json by_tag = nlohmann::json::object();
  for (const dist::CommRecord& r : group.log().records()) {
    // "ddp bucket 3" -> "ddp bucket": one line per kind of traffic.
    std::string tag = r.tag.rfind("ddp bucket", 0) == 0 ? "ddp bucket" : r.tag;
    const std::string key = r.op + (tag.empty() ? "" : " / " + tag);
    auto& entry = by_tag[key];
    if (entry.is_null()) entry = {{"calls", 0}, {"bytes", int64_t{0}}, {"seconds", 0.0}};
    entry["calls"] = entry.value("calls", 0) + 1;
    entry["bytes"] = entry.value("bytes", int64_t{0}) + r.bytes;
    entry["seconds"] = entry.value("seconds", 0.0) + r.seconds;
  }
  nlohmann::json j = sync.details();
  j["by_operation"] = by_tag;
  return j;
}

// The global batch is split evenly over the ranks: it stays fixed as ranks are added.
int64_t batch_per_rank(const GlueOptions& o, int world) {
  if (!o.global_batch_size) return o.per_gpu_train_batch_size;
  if (*o.global_batch_size % world != 0) {
    throw Error("--global_batch_size " + std::to_string(*o.global_batch_size) +
                " is not divisible by the world size " + std::to_string(world));
  }
  return *o.global_batch_size / world;
}

// The model on every rank (the same weights unless a test asks otherwise), then the gradient
// synchronisation, which brings every rank to rank 0's weights.
std::unique_ptr<train::GradientSync> build_model(const GlueOptions& o, const GlueExercise& ex,
                                                 train::Run& run, int64_t num_labels,
                                                 BertTrainState& state, model::LoadReport& report) {
  torch::manual_seed(o.seed + (o.init_seed_per_rank ? static_cast<uint64_t>(run.rank()) : 0));
  const model::BertOverrides overrides = overrides_from(o, num_labels);
  state.model = ex.own.load_model ? ex.own.load_model(o.model_name_or_path, overrides, &report)
                                  : model::from_pretrained(o.model_name_or_path, overrides, &report);
  if (!state.model) throw Error(ex.name + ": load_model returned no model");
  state.module = state.model.ptr();
  state.module->to(run.device);  // before the synchronisation sees the parameters (DDP's buckets)
  state.loss = classification_loss(state.model);
  std::unique_ptr<train::GradientSync> sync =
      ex.data_parallel ? ex.data_parallel->synchronise(state.module, *run.group, o) : train::no_sync();
  if (!sync) throw Error(ex.name + ": the gradient synchronisation was not set up");
  torch::manual_seed(o.seed);  // dropout draws the same on every rank, as in run_glue
  return sync;
}

void print_banner(const GlueOptions& o, const train::Run& run, const BertTrainState& state,
                  const train::LoopPlan& plan, const train::GradientSync& sync,
                  int64_t train_size, int64_t dev_size, const std::string& load_notice) {
  const model::BertConfig& config = state.model->config();
  const int world = run.world();
  fmt::print("dtlab {}\n", run.name);
  fmt::print("  model       {} (L{} H{} A{}, {:.2f}M parameters)\n", o.model_name_or_path,
             config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
             count_parameters(*state.model) / 1e6);
  fmt::print("  data        {}: {} train, {} dev examples, max_seq_length {}\n", o.data_dir,
             train_size, dev_size, o.max_seq_length);
  if (o.do_train) {
    fmt::print("  training    batch {} x {} rank{} = {}, {} epochs, {} steps, AdamW lr {:g} wd {:g}, "
               "warmup {}, clip {:g}, dropout {}\n",
               plan.batch_per_rank, world, world == 1 ? "" : "s", plan.batch_per_rank * world,
               plan.epochs, plan.total_steps, o.learning_rate, o.weight_decay, o.warmup_steps,
               o.max_grad_norm, o.dropout ? fmt::format("{:g}", *o.dropout) : "from config.json");
  } else {
    fmt::print("  training    off (evaluation only)\n");
  }
  if (run.group) {
    const nlohmann::json details = sync.details();
    const std::string buckets = details.contains("ddp_buckets")
        ? fmt::format(", {} DDP buckets (cap {:g} MB)", details["ddp_buckets"].size(), o.bucket_cap_mb) : "";
    fmt::print("  ranks       {}{}\n", run.describe_ranks(), buckets);
  }
  fmt::print("  runtime     {}\n", train::describe_runtime());
  std::fputs(load_notice.c_str(), stdout);
  std::fflush(stdout);
}

// The step: task 1's own, or the kit's with the exercise's synchronisation (and the grader's
// rank dump at the "gradients are synchronised" point when --dump_dir asks for it).
train::StepFunction choose_step(const GlueOptions& o, const GlueExercise& ex, const train::Run& run,
                                BertTrainState& state, train::GradientSync& sync,
                                const train::LoopPlan& plan) {
  if (ex.own.train_step && !ex.data_parallel) {
    if (!o.dump_dir.empty()) {
      throw Error("--dump_dir: " + ex.name + " uses its own train_step; the dump needs the kit's step");
    }
    return [&ex, &state](train::TrainState&, const train::StepInput& in) {
      return train::StepResult{ex.own.train_step(state, *in.batch), 0.0};
    };
  }
  if (o.dump_dir.empty()) return train::kit_step(sync);
  return train::step_with_rank_dumps(sync, {o.dump_dir, o.dump_step, run.rank(), run.world(),
                                            plan.batch_per_rank * run.world(), data::shard_indices(plan.sampler, 0),
                                            /*example_of_row=*/{}});
}

}  // namespace

SyncFactory sync_by_hand(std::function<void(torch::nn::Module&, dist::Group&)> broadcast_parameters,
                         train::SyncFunction sync_gradients) {
  return [broadcast_parameters, sync_gradients](std::shared_ptr<torch::nn::Module> model,
                                                dist::Group& group, const GlueOptions&) {
    broadcast_parameters(*model, group);
    return train::sync_after_backward(sync_gradients, *model, group, "sync_gradients");
  };
}

SyncFactory sync_by_ddp(std::function<std::unique_ptr<dist::DistributedDataParallel>(
                            std::shared_ptr<torch::nn::Module>, dist::Group&, const dist::DdpOptions&)>
                            wrap_model) {
  return [wrap_model](std::shared_ptr<torch::nn::Module> model, dist::Group& group,
                      const GlueOptions& o) -> std::unique_ptr<train::GradientSync> {
    dist::DdpOptions options;
    options.bucket_cap_bytes = static_cast<int64_t>(o.bucket_cap_mb * 1024 * 1024);
    std::unique_ptr<dist::DistributedDataParallel> ddp = wrap_model(model, group, options);
    if (!ddp) throw Error("wrap_model returned no DistributedDataParallel");
    return train::sync_by_ddp(std::move(ddp));
  };
}

int run_glue(const GlueOptions& o, const GlueExercise& ex) {
  // The tensors this process holds, counted from the start (results.json's "memory").
  report::TensorBytes::install();
  // Who this process is. Flags are checked before any rank waits for another.
  train::Run run = train::plan_run(ex.name, ex.data_parallel ? &o.launch : nullptr);
  validate(o);
  if (run.settings.rank == 0 && o.do_train && fs::is_directory(o.output_dir) &&
      !fs::is_empty(o.output_dir) && !o.overwrite_output_dir) {
    throw Error("--output_dir " + o.output_dir + " already exists and is not empty: use "
                "--overwrite_output_dir to overwrite it");
  }
  train::start_run(run, ex.data_parallel ? ex.data_parallel->setup : nullptr, o.threads);

  // Data: examples as run_glue reads them, tokenised once.
  const data::GlueTask task = data::glue_task(o.task_name);
  const tokenizer::BertTokenizer tokenizer = tokenizer::BertTokenizer::from_pretrained(o.model_name_or_path);
  const data::Features train_set = o.do_train ? read_features(o, tokenizer, "train") : data::Features{};
  const data::Features dev_set = o.do_eval ? read_features(o, tokenizer, "dev") : data::Features{};

  BertTrainState state;
  model::LoadReport load_report;
  run.after_startup = report::read_process_memory();  // Note [Memory a rank holds]: the data read, no model yet
  const std::unique_ptr<train::GradientSync> sync =
      build_model(o, ex, run, static_cast<int64_t>(task.labels.size()), state, load_report);
  if (tokenizer.vocab_size() > state.model->config().vocab_size) {
    throw Error((fs::path(o.model_name_or_path) / "vocab.txt").string() + " has " +
                std::to_string(tokenizer.vocab_size()) + " tokens but config.json's vocab_size is " +
                std::to_string(state.model->config().vocab_size));
  }

  // What is read: the whole set (shuffled by the sampler), or --train_order's examples in order.
  const FeaturesDataset all_examples(train_set);
  std::unique_ptr<train::OrderedExamples> ordered;
  if (!o.train_order.empty()) {
    ordered = std::make_unique<train::OrderedExamples>(
        all_examples, train::read_train_order(o.train_order, static_cast<int64_t>(train_set.size())));
  }
  const train::Dataset& examples = ordered ? static_cast<const train::Dataset&>(*ordered) : all_examples;

  train::LoopPlan plan;
  plan.batch_per_rank = batch_per_rank(o, run.world());
  plan.sampler = ex.data_parallel ? ex.data_parallel->make_sampler(examples.size(), *run.group, o.seed)
                                  : data::SamplerOptions{examples.size(), 1, 0, /*shuffle=*/!ordered, o.seed};
  train::plan_steps(plan, o.do_train ? examples.size() : 0, run.world(), o.num_train_epochs, o.max_steps);
  plan.evaluate = o.do_eval;
  plan.log_first_steps = o.log_first_steps;
  plan.progress_seconds = o.progress_seconds;
  if (o.profile) plan.profile_dir = o.output_dir;
  add_optimizer(state, o, plan.total_steps);
  int evaluations = 0;
  state.evaluate = [&] {
    ++evaluations;
    return run.group ? evaluate_distributed(state.model, dev_set, o.per_gpu_eval_batch_size, *run.group)
                     : evaluate(state.model, dev_set, o.per_gpu_eval_batch_size);
  };
  const train::AfterEpoch after_epoch = [&](train::TrainState&, int epoch) {
    const int before = evaluations;
    const train::EvalResult r = ex.own.after_epoch ? ex.own.after_epoch(state, epoch) : state.evaluate();
    if (evaluations == before) {
      throw Error(ex.name + ": after_epoch did not evaluate the model (call state.evaluate())");
    }
    return r;
  };

  report::Results results(ex.name, options_json(o, plan.batch_per_rank, run.world()), run.environment());
  const fs::path results_path = fs::path(o.output_dir) / "results.json";
  if (run.lead()) {
    print_banner(o, run, state, plan, *sync, train_set.size(), dev_set.size(),
                 load_report.describe(o.model_name_or_path));
  }
  if (o.do_train) {
    train_loop(run, state, examples, plan, choose_step(o, ex, run, state, *sync, plan),
               after_epoch, results, results_path);
  } else {
    report::EpochRecord record;
    train::record_evaluation(record, state.evaluate());
    results.add(record);
    if (run.lead()) {
      fmt::print("eval_accuracy={:.4f} eval_loss={:.4f} eval_examples={}\n", *record.eval_accuracy,
                 *record.eval_loss, record.eval_examples);
    }
  }
  if (run.group) results.set_section("communication", communication_json(*run.group, *sync));
  // Every rank's resident memory (a collective, after the communication record is read).
  if (o.do_train) {
    results.set_section("memory", train::memory_section(run));
    // Model FLOPs utilisation against the ranks' measured peak (a collective).
    const model::BertConfig model_config = state.model->config();
    results.set_section("compute", train::compute_section(run, [&model_config](double sequence) {
      return model::bert_training_flops_per_token(model_config, sequence);
    }, results.to_json().at("timing")));
  }
  if (run.lead()) {
    results.save(results_path);
    if (const std::string line = report::throughput_line(results.to_json()); !line.empty()) fmt::print("{}\n", line);
    if (o.do_train) fmt::print("{}\n", train::memory_line(results.to_json().at("memory")));
    if (o.do_train) {
      if (const std::string line = train::compute_line(results.to_json().at("compute")); !line.empty()) {
        fmt::print("{}\n", line);
      }
    }
    if (o.do_train && !o.no_save) save_model_folder(state.model, o.model_name_or_path, o.output_dir);
    fmt::print("results: {}\n", results_path.string());
  }
  return kExitOk;
}

int glue_main(int argc, char** argv, const GlueExercise& exercise) {
  return run_main(exercise.name.c_str(), [&]() -> int {
    GlueOptions options;
    CLI::App app{"dtlab " + exercise.name + ": fine-tune BERT on a GLUE task (run_glue.py's flags)"};
    add_glue_flags(app, options, exercise.flags);
    if (auto stop = parse_flags(app, argc, argv)) return *stop;
    return run_glue(options, exercise);
  });
}

}  // namespace dtlab::glue
