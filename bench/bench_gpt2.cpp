// bench_gpt2: seconds per training step of GPT-2 on random tokens, the step dtlab-gpt2 takes
// (train::training_step with lm::translation_loss, no gradient synchronisation).
//
// One step: forward, the target-token cross-entropy (every label counts here), backward,
// clipping at 1.0, AdamW (lr 1e-4, the driver's defaults), schedule step, zero_grad. Each model
// runs --iters steps; the first is discarded as warm-up (report::summarize), the rest averaged.
//
// The random batch is drawn right after the weights, from the same generator, as
// tokens = randint(0, vocab, [batch, seq + 1]); input_ids = tokens[:, :-1], labels =
// tokens[:, 1:]. bench/compare_eager.py draws the same in eager PyTorch, so with the same
// seed both sides train the same weights on the same batch (their first losses are compared).
//
// FLOPs per step, the usual matmul estimate (printed under the table):
//   6 N T + 12 L S H T    with T = batch x seq tokens
// N counts the parameters that multiply every token: the L blocks' weights and biases and the
// output projection (vocab x H, the tied wte used as a matrix). The embedding lookups (wte, wpe)
// are not matmuls and are not counted. 6 = a multiply-add forward and two backward (input and
// weight gradients). Attention's QK^T and PV add 2 x 2 S H per token per layer forward, x3, over
// the full S x S (the causal mask does not halve the work of eager attention). Softmax, GELU,
// LayerNorm, dropout, clipping and AdamW are elementwise and not counted.
//
// --device cuda[:N] runs the same on a GPU (weights and batch drawn on the CPU, then moved), reads
// the clock after torch::cuda::synchronize() and adds each model's share of the GPU's nominal
// fp32 peak under the table (Note [Share of the peak], step_bench.h).
#include <CLI/CLI.hpp>
#include <torch/types.h>
#include <torch/utils.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/io/json_file.h"
#include "dtlab/lm/loss.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/model/ops.h"
#include "dtlab/report/profile.h"
#include "dtlab/report/timing.h"
#include "dtlab/train/gradient_sync.h"
#include "dtlab/train/optimizer.h"
#include "dtlab/train/runtime.h"
#include "step_bench.h"
#include "dtlab/train/step.h"

namespace {

using namespace dtlab;

const std::vector<std::string> kModels = {"gpt2-mini", "gpt2"};

struct Options {
  std::vector<std::string> models = kModels;
  int iters = 6;
  int64_t batch = 8;
  int64_t seq = 128;
  int threads = 0;
  uint64_t seed = 42;
  std::optional<double> dropout;  // unset: the config's (0.1)
  std::string json;
  bench::StepBenchFlags flags;  // --profile, --plain, --versus_plain, --device
  torch::Device device{torch::kCPU};  // --device, checked (bench::bench_device)
};

struct ParameterCounts {
  int64_t total = 0, blocks = 0, matmul = 0;  // matmul: blocks + the output projection
};

ParameterCounts count_parameters(const model::Gpt2LMHeadModel& m) {
  ParameterCounts c;
  for (const auto& item : m->named_parameters()) {
    c.total += item.value().numel();
    if (item.key().rfind("transformer.h.", 0) == 0) c.blocks += item.value().numel();
  }
  c.matmul = c.blocks + m->lm_head_weight().numel();
  return c;
}

double flops_per_iteration(const ParameterCounts& p, const model::Gpt2Config& c, int64_t batch,
                           int64_t seq) {
  const double tokens = double(batch) * double(seq);
  return 6.0 * double(p.matmul) * tokens + 12.0 * double(c.n_layer) * double(seq) * double(c.n_embd) * tokens;
}

struct Row {
  std::string name;
  model::Gpt2Config config;
  ParameterCounts params;
  std::vector<double> seconds;  // every step, the discarded first included
  std::vector<float> losses;
  report::TimingSummary t;
  double flops = 0;
};

Row run_model(const std::string& name, const Options& o) {
  Row row;
  row.name = name;
  row.config = model::Gpt2Config::preset(name);
  if (o.dropout) model::Gpt2Overrides::dropout(*o.dropout).apply(row.config);
  if (o.seq > row.config.n_positions) {
    throw Error(fmt::format("--seq {} is longer than {}'s n_positions {}", o.seq, name, row.config.n_positions));
  }

  torch::manual_seed(o.seed);
  model::Gpt2LMHeadModel model(row.config);
  const torch::Tensor tokens = torch::randint(0, row.config.vocab_size, {o.batch, o.seq + 1}, torch::kInt64);
  data::Batch batch;
  batch.input_ids = tokens.narrow(1, 0, o.seq).contiguous();
  batch.labels = tokens.narrow(1, 1, o.seq).contiguous();
  batch.label_weights = torch::ones({o.batch, o.seq}, torch::kFloat32);
  // Weights and batch are drawn on the CPU (the same numbers on every device, and as
  // bench/compare_eager.py draws them), then moved before the optimizer sees the weights.
  model->to(o.device);
  batch = batch.to(o.device);

  train::TrainState state;
  state.module = model.ptr();
  state.loss = lm::translation_loss(model);
  state.optimizer = train::make_adamw(*model, {1e-4, 0.0});
  state.scheduler = std::make_unique<train::LinearWarmupSchedule>(*state.optimizer, 0, o.iters);
  state.max_grad_norm = 1.0;
  const std::unique_ptr<train::GradientSync> sync = train::no_sync();

  row.params = count_parameters(model);
  row.flops = flops_per_iteration(row.params, row.config, o.batch, o.seq);
  const bool progress = isatty(STDERR_FILENO);
  for (int i = 0; i < o.iters; ++i) {
    if (progress) {
      fmt::print(stderr, "\r  {}: step {}/{}...", name, i + 1, o.iters);
      std::fflush(stderr);
    }
    train::StepInput input;
    input.step = i + 1;
    input.epoch = 1;
    input.batch = &batch;
    bench::synchronize(o.device);  // CUDA: nothing of the previous step still queued
    report::Stopwatch watch;
    const float loss = train::training_step(state, input, *sync).loss;
    bench::synchronize(o.device);
    row.seconds.push_back(watch.seconds());
    row.losses.push_back(loss);
    if (!std::isfinite(loss)) throw Error(fmt::format("{}: the loss is {} at step {}", name, loss, i + 1));
  }
  if (progress) {
    fmt::print(stderr, "\r{:40}\r", "");
    std::fflush(stderr);
  }
  row.t = report::summarize(row.seconds, row.seconds.size());
  if (!o.flags.profile.empty()) {
    // Three more steps under the profiler, after the timed ones, so that its cost is in no figure.
    report::StepProfiler profiler(o.flags.profile / name, "bench_gpt2 " + name, o.iters + 1, report::kProfileSteps);
    for (int64_t step = o.iters + 1; step <= o.iters + report::kProfileSteps; ++step) {
      train::StepInput input;
      input.step = step;
      input.epoch = 1;
      input.batch = &batch;
      profiler.before_step(step);
      train::training_step(state, input, *sync);
      if (profiler.after_step(step)) fmt::print("  profile of {}: {}\n", name, (o.flags.profile / name).string());
    }
  }
  return row;
}

constexpr const char* kHeaderFormat = "{:<9} {:>10} {:>8} {:>7} {:>5} {:>8} {:>7} {:>17} {:>9} {:>9} {:>8}\n";

void print_table_header() {
  fmt::print(kHeaderFormat, "model", "L/H/A", "params", "N", "iters", "s/iter", "stdev", "min-max s",
             "tokens/s", "GFLOP/it", "GFLOP/s");
}

void print_row(const Row& r, const Options& o) {
  const double mean = r.t.mean;
  fmt::print("{:<9} {:>10} {:>7.2f}M {:>6.2f}M {:>5} {:>8.3f} {:>7.3f} {:>17} {:>9.0f} {:>9.1f} {:>8.1f}\n",
             r.name, fmt::format("{}/{}/{}", r.config.n_layer, r.config.n_embd, r.config.n_head),
             r.params.total / 1e6, r.params.matmul / 1e6,
             fmt::format("{}+{}", report::kDiscardedIterations, r.t.count), mean, r.t.stdev,
             fmt::format("{:.3f}-{:.3f}", r.t.min, r.t.max), double(o.batch * o.seq) / mean,
             r.flops / 1e9, r.flops / mean / 1e9);
  std::fflush(stdout);
}

nlohmann::json row_json(const Row& r, const Options& o) {
  const double mean = r.t.mean;
  return {{"model", r.name},
          {"n_layer", r.config.n_layer},
          {"n_embd", r.config.n_embd},
          {"n_head", r.config.n_head},
          {"vocab_size", r.config.vocab_size},
          {"dropout", r.config.resid_pdrop},
          {"parameters", r.params.total},
          {"block_parameters", r.params.blocks},
          {"matmul_parameters", r.params.matmul},
          {"iterations", r.seconds.size()},
          {"iterations_timed", r.t.count},
          {"seconds", r.seconds},
          {"losses", r.losses},
          {"seconds_per_iteration", {{"mean", mean}, {"stdev", r.t.stdev}, {"min", r.t.min}, {"max", r.t.max}}},
          {"tokens_per_second", double(o.batch * o.seq) / mean},
          {"flops_per_iteration", r.flops},
          {"gflops_per_second", r.flops / mean / 1e9}};
}

int run(const Options& o) {
  if (o.iters <= static_cast<int>(report::kDiscardedIterations)) {
    throw Error(fmt::format("--iters must be at least {}: the first step is discarded",
                            report::kDiscardedIterations + 1));
  }
  if (o.batch < 1) throw Error("--batch must be at least 1");
  if (o.seq < 1) throw Error("--seq must be at least 1");

  report::Stopwatch total;
  const int threads = train::configure_threads(o.threads);
  const train::BlasInfo blas = train::detect_blas();
  const bool quiet = o.json == "-";  // the comparison script reads stdout as JSON
  const bench::DeviceInfo device = bench::describe_device(o.device);
  if (!quiet) {
    fmt::print("bench_gpt2: the GPT-2 training step of dtlab-gpt2 (forward, target-token loss, backward, "
               "clip 1.0, AdamW, schedule, zero_grad){}\n", o.flags.plain ? ", written the obvious way (--plain)" : "");
    fmt::print("  runtime  {}\n", train::describe_runtime());
    fmt::print("  input    random tokens, batch {} x seq {} = {} tokens/iter, dropout {}\n", o.batch, o.seq,
               o.batch * o.seq, o.dropout ? fmt::format("{:g}", *o.dropout) : "0.1 (the config's)");
    fmt::print("  timing   first iteration discarded, mean of the rest (iters column: discarded+timed)\n");
    if (o.device.is_cuda()) fmt::print("{}", bench::device_line(device));
    fmt::print("\n");
    print_table_header();
  }

  std::vector<Row> rows;
  for (const std::string& name : o.models) {
    rows.push_back(run_model(name, o));
    if (!quiet) print_row(rows.back(), o);
  }
  const double wall = total.seconds();
  if (!quiet) {
    fmt::print("\nparams: all parameters; N: the block weights and the output projection (the matmul "
               "parameters)\nFLOPs/iter = 6*N*T + 12*L*S*H*T, T = batch*seq tokens, S = seq; elementwise "
               "work not counted\n");
    if (o.device.is_cuda()) {
      std::vector<std::pair<std::string, double>> achieved;
      for (const Row& r : rows) achieved.emplace_back(r.name, r.flops / r.t.mean);
      bench::print_peak_shares(device, achieved);
    }
    fmt::print("total wall time {:.1f} s\n", wall);
  }
  if (!o.json.empty()) {
    nlohmann::json models = nlohmann::json::array();
    for (const Row& r : rows) {
      models.push_back(row_json(r, o));
      if (const auto share = bench::peak_share(device, r.flops / r.t.mean)) {
        models.back()["share_of_nominal_fp32_peak"] = *share;
      }
    }
    nlohmann::json j = {
        {"benchmark", "bench_gpt2"},
        {"step", "dtlab::train::training_step + dtlab::lm::translation_loss (dtlab-gpt2's step)"},
        {"ops", o.flags.plain ? "plain" : "kit"},
        {"environment",
         {{"hostname", train::host_name()}, {"libtorch", TORCH_VERSION}, {"blas", blas.name},
          {"blas_library", blas.path}, {"threads", threads}}},
        {"settings",
         {{"batch", o.batch}, {"seq", o.seq}, {"iters", o.iters}, {"seed", o.seed},
          {"discarded_iterations", report::kDiscardedIterations}, {"max_grad_norm", 1.0},
          {"learning_rate", 1e-4}, {"weight_decay", 0.0}}},
        {"flops_formula", "6*N*T + 12*L*S*H*T; N = block and output-projection parameters, T = batch*seq"},
        {"models", models},
        {"wall_seconds", wall}};
    if (o.device.is_cuda()) j["environment"]["device"] = bench::device_json(device);
    if (quiet) {
      fmt::print("{}\n", j.dump());
    } else {
      io::write_json_file(o.json, j);
      fmt::print("json: {}\n", o.json);
    }
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  // --plain keeps glibc's allocator defaults too (model/ops.h), so it is known before run_main.
  const bool plain = std::find(argv + 1, argv + argc, std::string("--plain")) != argv + argc;
  return dtlab::run_main("bench_gpt2", [&]() -> int {
    Options o;
    CLI::App app{"Times the GPT-2 training step of dtlab-gpt2 on random tokens (gpt2-mini, GPT-2 small)"};
    app.add_option("--models", o.models, "Comma-separated subset of gpt2-mini,gpt2 (Gpt2Config presets)")
        ->delimiter(',')
        ->check(CLI::IsMember(kModels))
        ->capture_default_str();
    app.add_option("--iters", o.iters, "Steps per model, the first discarded")->capture_default_str();
    app.add_option("--batch", o.batch, "Sequences per step")->capture_default_str();
    app.add_option("--seq", o.seq, "Tokens per sequence")->capture_default_str();
    app.add_option("--threads", o.threads, "Intra-op threads (0: the cores available)")->capture_default_str();
    app.add_option("--seed", o.seed, "Seed of the weights and the random batch")->capture_default_str();
    app.add_option("--dropout", o.dropout, "All three dropout probabilities (default: the config's 0.1)")
        ->check(CLI::Range(0.0, 0.999));
    app.add_option("--json", o.json, "Also write the figures as JSON to this file ('-': only the JSON, on stdout)");
    dtlab::bench::add_step_bench_flags(app, o.flags, "torch::dropout");
    if (auto stop = dtlab::parse_flags(app, argc, argv)) return *stop;
    o.device = dtlab::bench::bench_device(o.flags.device);  // before anything runs: exit 2 at once
    if (o.flags.versus_plain > 0) {
      std::vector<std::string> shared = {"--iters", std::to_string(o.iters), "--batch", std::to_string(o.batch),
                                         "--seq", std::to_string(o.seq), "--threads", std::to_string(o.threads),
                                         "--seed", std::to_string(o.seed), "--device", o.flags.device};
      if (o.dropout) shared.insert(shared.end(), {"--dropout", std::to_string(*o.dropout)});
      return dtlab::bench::versus_plain(shared, o.models, o.flags.versus_plain);
    }
    if (o.flags.plain) dtlab::model::use_ops(dtlab::model::Ops::plain);
    return run(o);
  }, /*keep_memory=*/!plain);
}
