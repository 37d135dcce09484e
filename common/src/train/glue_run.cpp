// The GLUE fine-tuning driver: one readable path from flags to results.json.
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
#include "dtlab/train/runtime.h"

namespace fs = std::filesystem;

namespace dtlab::train {
namespace {

nlohmann::json options_json(const GlueOptions& o) {
  return {{"model_type", o.model_type},
          {"model_name_or_path", o.model_name_or_path},
          {"task_name", o.task_name},
          {"data_dir", o.data_dir},
          {"output_dir", o.output_dir},
          {"do_train", o.do_train},
          {"do_eval", o.do_eval},
          {"max_seq_length", o.max_seq_length},
          {"per_gpu_train_batch_size", o.per_gpu_train_batch_size},
          {"per_gpu_eval_batch_size", o.per_gpu_eval_batch_size},
          {"learning_rate", o.learning_rate},
          {"weight_decay", o.weight_decay},
          {"adam_epsilon", o.adam_epsilon},
          {"max_grad_norm", o.max_grad_norm},
          {"num_train_epochs", o.num_train_epochs},
          {"max_steps", o.max_steps},
          {"warmup_steps", o.warmup_steps},
          {"seed", o.seed},
          {"dropout", o.dropout ? nlohmann::json(*o.dropout) : nlohmann::json()}};
}

std::string hostname() {
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  return name;
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

}  // namespace

int run_glue(const GlueOptions& o, const GlueExercise& ex) {
  validate(o);
  const int threads = configure_threads(o.threads);
  torch::manual_seed(o.seed);

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

  // Model: the exercise loads it.
  model::BertOverrides overrides;
  if (o.dropout) overrides = model::BertOverrides::dropout(*o.dropout);
  overrides.num_labels = static_cast<int64_t>(task.labels.size());
  model::LoadReport load_report;
  TrainState state;
  state.model = ex.load_model(model_dir, overrides, &load_report);
  if (!state.model) throw Error(ex.name + ": load_model returned no model");
  const model::BertConfig& config = state.model->config();
  if (tokenizer.vocab_size() > config.vocab_size) {
    throw Error((model_dir / "vocab.txt").string() + " has " +
                std::to_string(tokenizer.vocab_size()) + " tokens but config.json's vocab_size is " +
                std::to_string(config.vocab_size));
  }

  // Optimiser and schedule, as run_glue sets them up.
  const int64_t batch = o.per_gpu_train_batch_size;
  const int64_t steps_per_epoch = o.do_train ? (train_set.size() + batch - 1) / batch : 0;
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
    return evaluate(state.model, dev_set, o.per_gpu_eval_batch_size);
  };

  const BlasInfo blas = detect_blas();
  const nlohmann::json environment = {
      {"hostname", hostname()}, {"libtorch", TORCH_VERSION}, {"blas", blas.name},
      {"blas_library", blas.path}, {"threads", threads}, {"world_size", 1}, {"backend", nullptr}};
  report::Results results(ex.name, options_json(o), environment);
  const fs::path results_path = fs::path(o.output_dir) / "results.json";

  fmt::print("dtlab {}\n", ex.name);
  fmt::print("  model       {} (L{} H{} A{}, {:.2f}M parameters)\n", o.model_name_or_path,
             config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
             count_parameters(*state.model) / 1e6);
  fmt::print("  data        {}: {} train, {} dev examples, max_seq_length {}\n", o.data_dir,
             train_set.size(), dev_set.size(), o.max_seq_length);
  if (o.do_train) {
    fmt::print("  training    batch {} x 1 rank, {} epochs, {} steps, AdamW lr {:g} wd {:g}, "
               "warmup {}, clip {:g}, dropout {}\n",
               batch, epochs, total_steps, o.learning_rate, o.weight_decay, o.warmup_steps,
               o.max_grad_norm, o.dropout ? fmt::format("{:g}", *o.dropout) : "from config.json");
  } else {
    fmt::print("  training    off (evaluation only)\n");
  }
  fmt::print("  runtime     {}\n", describe_runtime());
  std::fputs(load_report.describe(model_dir.string()).c_str(), stdout);
  std::fflush(stdout);

  int64_t step = 0;
  const double log_every = o.progress_seconds;
  report::Stopwatch since_start, since_progress;
  for (int epoch = 1; epoch <= epochs && o.do_train && step < total_steps; ++epoch) {
    report::Stopwatch epoch_time;
    double loss_sum = 0;
    int64_t epoch_steps = 0;
    const data::SamplerOptions sampler{train_set.size(), /*world_size=*/1, /*rank=*/0,
                                       /*shuffle=*/true, o.seed};
    for (const auto& indices : data::minibatches(data::shard_indices(sampler, epoch - 1), batch)) {
      if (step >= total_steps) break;
      const data::Batch b = data::make_batch(train_set, indices);
      const double lr = state.scheduler->last_lr();
      report::Stopwatch step_time;
      const float loss = ex.train_step(state, b);
      const double seconds = step_time.seconds();
      ++step;
      if (!std::isfinite(loss)) {
        throw Error(fmt::format("the loss is {} at step {}: lower --learning_rate or check the "
                                "data", loss, step));
      }
      results.add(report::IterationRecord{step, epoch, loss, seconds, lr, b.size(), b.real_tokens()});
      loss_sum += loss;
      ++epoch_steps;
      if (step <= o.log_first_steps) {
        fmt::print("step={} epoch={} loss={:.6f} lr={:.3e} seconds={:.3f}\n", step, epoch, loss, lr,
                   seconds);
        std::fflush(stdout);
      } else if (since_progress.seconds() >= log_every) {
        const double per_step = since_start.seconds() / double(step);
        fmt::print("progress step={}/{} epoch={}/{} loss_avg={:.4f} seconds_per_step={:.3f} eta={}\n",
                   step, total_steps, epoch, epochs, loss_sum / double(epoch_steps), per_step,
                   duration(per_step * double(total_steps - step)));
        std::fflush(stdout);
        since_progress.restart();
      }
    }
    report::EpochRecord record;
    record.epoch = epoch;
    record.train_loss = epoch_steps ? loss_sum / double(epoch_steps) : 0.0;
    if (o.do_eval) {
      const int before = evaluations;
      const EvalResult r = ex.after_epoch(state, epoch);
      if (evaluations == before) {
        throw Error(ex.name + ": after_epoch did not evaluate the model (call state.evaluate())");
      }
      record.eval_accuracy = r.accuracy;
      record.eval_loss = r.loss;
      record.eval_examples = r.examples;
    }
    record.seconds = epoch_time.seconds();
    results.add(record);
    fmt::print("epoch={} train_loss={:.4f}", epoch, record.train_loss);
    if (record.eval_accuracy) {
      fmt::print(" eval_accuracy={:.4f} eval_loss={:.4f} eval_examples={}", *record.eval_accuracy,
                 *record.eval_loss, record.eval_examples);
    }
    fmt::print(" seconds={:.1f}\n", record.seconds);
    std::fflush(stdout);
    results.save(results_path);
  }
  if (!o.do_train && o.do_eval) {
    const EvalResult r = state.evaluate();
    report::EpochRecord record;
    record.eval_accuracy = r.accuracy;
    record.eval_loss = r.loss;
    record.eval_examples = r.examples;
    results.add(record);
    fmt::print("eval_accuracy={:.4f} eval_loss={:.4f} eval_examples={}\n", r.accuracy, r.loss, r.examples);
  }
  results.save(results_path);
  if (o.do_train && !o.no_save) save_model_folder(state.model, model_dir, o.output_dir);
  fmt::print("results: {}\n", results_path.string());
  return kExitOk;
}

int glue_main(int argc, char** argv, const GlueExercise& exercise) {
  return run_main(exercise.name.c_str(), [&]() -> int {
    GlueOptions options;
    CLI::App app{"dtlab " + exercise.name + ": fine-tune BERT on a GLUE task (run_glue.py's flags)"};
    add_glue_flags(app, options);
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      return app.exit(e) == 0 ? kExitOk : kExitUsage;
    }
    return run_glue(options, exercise);
  });
}

}  // namespace dtlab::train
