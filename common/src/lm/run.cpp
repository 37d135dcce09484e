// The GPT-2 translation driver, see lm/run.h: one readable path from flags to results.json.
#include "dtlab/lm/run.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>

#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/lm/dataset.h"
#include "dtlab/lm/evaluate.h"
#include "dtlab/lm/loss.h"
#include "dtlab/lm/model.h"
#include "dtlab/report/results.h"
#include "dtlab/train/loop.h"
#include "dtlab/train/runtime.h"

namespace fs = std::filesystem;

namespace dtlab::lm {
namespace {

nlohmann::json options_json(const LmOptions& o, int64_t per_rank_batch, int world) {
  return {{"model_name_or_path", o.model_name_or_path},
          {"model_config", o.model_config},
          {"tokenizer_dir", tokenizer_folder(o)},
          {"data_dir", o.data_dir},
          {"output_dir", o.output_dir},
          {"per_rank_train_batch_size", per_rank_batch},
          {"global_train_batch_size", per_rank_batch * world},
          {"max_length", o.max_length},
          {"learning_rate", o.learning_rate},
          {"weight_decay", o.weight_decay},
          {"warmup_steps", o.warmup_steps},
          {"max_grad_norm", o.max_grad_norm},
          {"num_epochs", o.num_epochs},
          {"max_steps", o.max_steps},
          {"seed", o.seed},
          {"dropout", o.dropout ? nlohmann::json(*o.dropout) : nlohmann::json()},
          {"eval_batch_size", o.eval_batch_size},
          {"bleu_examples", o.bleu_examples},
          {"max_new_tokens", o.max_new_tokens}};
}

// The global batch is split evenly over the ranks: it stays fixed as ranks are added.
int64_t batch_per_rank(const LmOptions& o, int world) {
  if (!o.global_batch_size) return o.per_device_batch_size;
  if (*o.global_batch_size % world != 0) {
    throw Error("--global_batch_size " + std::to_string(*o.global_batch_size) +
                " is not divisible by the world size " + std::to_string(world));
  }
  return *o.global_batch_size / world;
}

// The three splits: training and validation rows tokenised once; the test pairs BLEU translates.
struct LmData {
  data::LmExamples train, validation;
  std::vector<data::TranslationPair> test;
};

LmData read_data(const LmOptions& o, const tokenizer::Gpt2Tokenizer& tokenizer, const LmTokenIds& ids) {
  LmData d;
  d.train = encode_pairs(data::read_translation_split(o.data_dir, "train"), tokenizer, ids, o.max_length);
  d.validation = encode_pairs(data::read_translation_split(o.data_dir, "validation"), tokenizer, ids,
                              o.max_length);
  if (o.bleu_examples != 0) {
    d.test = data::read_translation_split(o.data_dir, "test");
    if (o.bleu_examples > 0 && o.bleu_examples < static_cast<int64_t>(d.test.size())) {
      d.test.resize(static_cast<size_t>(o.bleu_examples));
    }
  }
  return d;
}

// The model on every rank, then the gradient synchronisation, which brings every rank to rank
// 0's weights.
std::unique_ptr<train::GradientSync> build_model(const LmOptions& o, const LmExercise& ex,
                                                 train::Run& run, const tokenizer::Gpt2Tokenizer& tokenizer,
                                                 const LmTokenIds& ids, LmTrainState& state,
                                                 model::LoadReport& report) {
  state.model = load_model(o, tokenizer, ids, &report);
  state.module = state.model.ptr();
  // Data parallel: the loss of each rank is its share of the union's (Note [Data-parallel loss]).
  state.loss = translation_loss(state.model, ex.data_parallel ? run.group.get() : nullptr);
  std::unique_ptr<train::GradientSync> sync =
      ex.data_parallel ? ex.data_parallel->synchronise(state.module, *run.group, o) : train::no_sync();
  if (!sync) throw Error(ex.name + ": the gradient synchronisation was not set up");
  torch::manual_seed(o.seed);  // dropout draws the same on every rank
  return sync;
}

void add_optimizer(train::TrainState& state, const LmOptions& o, int64_t total_steps) {
  state.max_grad_norm = o.max_grad_norm;
  state.optimizer = train::make_adamw(*state.module, {o.learning_rate, o.weight_decay});
  state.scheduler = std::make_unique<train::LinearWarmupSchedule>(*state.optimizer, o.warmup_steps, total_steps);
}

void print_samples(const std::vector<Translation>& translations, int samples) {
  for (size_t i = 0; i < translations.size() && static_cast<int>(i) < samples; ++i) {
    fmt::print("sample {}: source     {}\n          reference  {}\n          translated {}\n", i + 1,
               translations[i].source, translations[i].reference, translations[i].hypothesis);
  }
  std::fflush(stdout);
}

void print_banner(const LmOptions& o, const train::Run& run, const LmTrainState& state,
                  const train::LoopPlan& plan, const tokenizer::Gpt2Tokenizer& tokenizer,
                  const LmData& d, const std::string& load_notice) {
  const model::Gpt2Config& c = state.model->config();
  const int world = run.world();
  fmt::print("dtlab {}\n", run.name);
  fmt::print("  model       {} (L{} H{} A{}, vocab {}, positions {}, {:.2f}M parameters)\n",
             o.model_config.empty() ? o.model_name_or_path : o.model_config + " (random weights)",
             c.n_layer, c.n_embd, c.n_head, c.vocab_size, c.n_positions,
             count_parameters(*state.model) / 1e6);
  fmt::print("  tokenizer   {} ({} tokens)\n", tokenizer_folder(o), tokenizer.vocab_size());
  fmt::print("  data        {}: {} train, {} validation pairs ({} train rows cut at max_length {}), "
             "BLEU on {} test pairs\n", o.data_dir, d.train.size(), d.validation.size(),
             d.train.truncated, o.max_length, d.test.size());
  fmt::print("  training    batch {} x {} rank{} = {}, {} epochs, {} steps, AdamW lr {:g} wd {:g}, "
             "warmup {}, clip {:g}, dropout {}\n",
             plan.batch_per_rank, world, world == 1 ? "" : "s", plan.batch_per_rank * world,
             plan.epochs, plan.total_steps, o.learning_rate, o.weight_decay, o.warmup_steps,
             o.max_grad_norm, o.dropout ? fmt::format("{:g}", *o.dropout) : "from the config");
  if (run.group) fmt::print("  ranks       {}\n", run.describe_ranks());
  fmt::print("  runtime     {}\n", train::describe_runtime());
  std::fputs(load_notice.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace

int run_lm(const LmOptions& o, const LmExercise& ex) {
  // Who this process is. Flags are checked before any rank waits for another.
  train::Run run = train::plan_run(ex.name, ex.data_parallel ? &o.launch : nullptr);
  validate(o);
  if (run.settings.rank == 0 && fs::is_directory(o.output_dir) && !fs::is_empty(o.output_dir) &&
      !o.overwrite_output_dir) {
    throw Error("--output_dir " + o.output_dir + " already exists and is not empty: use "
                "--overwrite_output_dir to overwrite it");
  }
  train::start_run(run, ex.data_parallel ? ex.data_parallel->setup : nullptr, o.threads);

  // Tokenizer and data, tokenised once; then the model and how its gradients travel.
  const tokenizer::Gpt2Tokenizer tokenizer = load_tokenizer(o);
  const LmTokenIds ids = lm_token_ids(tokenizer, tokenizer_folder(o));
  const LmData d = read_data(o, tokenizer, ids);
  LmTrainState state;
  model::LoadReport load_report;
  const std::unique_ptr<train::GradientSync> sync = build_model(o, ex, run, tokenizer, ids, state, load_report);

  train::LoopPlan plan;
  plan.batch_per_rank = batch_per_rank(o, run.world());
  plan.sampler = ex.data_parallel ? ex.data_parallel->make_sampler(d.train.size(), *run.group, o.seed)
                                  : data::SamplerOptions{d.train.size(), 1, 0, /*shuffle=*/true, o.seed};
  train::plan_steps(plan, d.train.size(), run.world(), o.num_epochs, o.max_steps);
  plan.log_first_steps = o.log_first_steps;
  plan.progress_seconds = o.progress_seconds;
  add_optimizer(state, o, plan.total_steps);
  const EvalInputs eval{state.model, &tokenizer, ids, &d.validation, &d.test, o.eval_batch_size,
                        TranslateOptions{o.eval_batch_size, o.max_length, o.max_new_tokens}};
  state.evaluate = [&] {
    std::vector<Translation> translations;
    const train::EvalResult r = evaluate_translation(eval, run.group.get(), &translations);
    if (run.lead()) print_samples(translations, o.samples);
    return r;
  };

  report::Results results(ex.name, options_json(o, plan.batch_per_rank, run.world()), run.environment());
  const fs::path results_path = fs::path(o.output_dir) / "results.json";
  if (run.lead()) {
    const std::string notice = o.model_config.empty() ? load_report.describe(o.model_name_or_path) : "";
    print_banner(o, run, state, plan, tokenizer, d, notice);
  }
  train::train_loop(run, state, LmDataset(d.train), plan, train::kit_step(*sync),
                    [](train::TrainState& s, int) { return s.evaluate(); }, results, results_path);
  if (run.lead()) {
    results.save(results_path);
    if (!o.no_save) save_model_folder(state.model, tokenizer_folder(o), o.output_dir);
    fmt::print("results: {}\n", results_path.string());
  }
  return kExitOk;
}

int lm_main(int argc, char** argv, const LmExercise& exercise) {
  return run_main(exercise.name.c_str(), [&]() -> int {
    LmOptions options;
    CLI::App app{"dtlab " + exercise.name + ": train GPT-2 to translate German->English as a "
                 "language model, evaluated by loss, perplexity and BLEU"};
    add_lm_flags(app, options, exercise.data_parallel.has_value());
    if (auto stop = parse_flags(app, argc, argv)) return *stop;
    return run_lm(options, exercise);
  });
}

}  // namespace dtlab::lm
