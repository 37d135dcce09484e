// bench_task1: seconds per training step of task 1 (dtlab::task1::train_step, linked from the
// reference solution) for the standard small BERT shapes, on random tokens.
//
// One step is what the driver times: forward with labels, backward, gradient clipping, AdamW
// step, schedule step, zero_grad. Each model runs --iters steps (--base_iters for base); the
// first is discarded as warm-up (report::summarize) and the rest are averaged.
//
// FLOPs per step, the usual matmul estimate (printed under the table):
//   6 N T + 12 L S H T    with T = batch x seq tokens
// N counts the encoder's parameters (the L layers' weights, biases and LayerNorms). Each weight
// costs a multiply-add (2 FLOPs) per token forward and twice that backward (input and weight
// gradients): 6 per token. Embeddings are lookups, not matmuls, and the pooler and classifier see
// one token per sequence (< 1% of the total at these shapes), so neither is counted. Attention
// adds two matmuls whose size grows with S, QK^T and PV: 2 x 2 S H FLOPs per token per layer
// forward, x3 for forward and backward. Softmax, GELU, LayerNorm, dropout, clipping and AdamW
// are elementwise and not counted.
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
#include "dtlab/data/glue.h"
#include "dtlab/io/json_file.h"
#include "dtlab/model/bert.h"
#include "dtlab/model/ops.h"
#include "dtlab/report/profile.h"
#include "dtlab/report/timing.h"
#include "dtlab/tasks/task1.h"
#include "dtlab/train/optimizer.h"
#include "dtlab/train/runtime.h"
#include "dtlab/glue/run.h"
#include "step_bench.h"

namespace {

using namespace dtlab;

struct Shape {
  std::string name;
  int64_t layers, hidden, heads;
};

// The small BERTs of Turc et al. (google-research/bert), plus BERT-base.
const std::vector<Shape> kShapes = {
    {"tiny", 2, 128, 2}, {"mini", 4, 256, 4}, {"small", 4, 512, 8}, {"base", 12, 768, 12}};

struct Options {
  std::vector<std::string> models = {"tiny", "mini", "small", "base"};
  int iters = static_cast<int>(report::kTimedIterations);
  // A base step at batch 64 x 128 takes ~45 s on 2 cores and the discarded first one ~2x that:
  // 3 keeps the default run (all four models) near 9 minutes.
  int base_iters = 3;
  int64_t batch = 64;
  int64_t seq = 128;
  int threads = 0;
  uint64_t seed = 42;
  std::string json;
  bench::StepBenchFlags flags;  // --profile, --plain, --versus_plain, --device
  torch::Device device{torch::kCPU};  // --device, checked (bench::bench_device)
};

struct ParameterCounts {
  int64_t total = 0, embeddings = 0, encoder = 0, head = 0;  // head: pooler and classifier
};

ParameterCounts count_parameters(const torch::nn::Module& m) {
  ParameterCounts c;
  for (const auto& item : m.named_parameters()) {
    const int64_t n = item.value().numel();
    c.total += n;
    const std::string& key = item.key();
    if (key.rfind("bert.embeddings.", 0) == 0) {
      c.embeddings += n;
    } else if (key.rfind("bert.encoder.", 0) == 0) {
      c.encoder += n;
    } else {
      c.head += n;
    }
  }
  return c;
}

double flops_per_iteration(const ParameterCounts& p, const Shape& s, int64_t batch, int64_t seq) {
  const double tokens = double(batch) * double(seq);
  return 6.0 * double(p.encoder) * tokens +
         12.0 * double(s.layers) * double(seq) * double(s.hidden) * tokens;
}

struct Row {
  Shape shape;
  ParameterCounts params;
  std::vector<double> seconds;  // every step, the discarded first included
  report::TimingSummary t;
  double flops = 0;
  float last_loss = 0;
  std::vector<float> losses;  // of the timed run's steps
};

// One minibatch as the data pipeline would hand it: random word ids, all-ones attention mask
// (every position is a real token), random segment ids and labels. Drawn on the CPU (the same
// numbers on every device, and as bench/compare_eager.py draws them), then moved to `device`.
data::Batch random_batch(int64_t vocab, int64_t batch, int64_t seq, const torch::Device& device) {
  const auto i64 = torch::TensorOptions().dtype(torch::kInt64);
  data::Batch b;
  b.input_ids = torch::randint(0, vocab, {batch, seq}, i64);
  b.attention_mask = torch::ones({batch, seq}, i64);
  b.token_type_ids = torch::randint(0, 2, {batch, seq}, i64);
  b.labels = torch::randint(0, 2, {batch}, i64);
  return b.to(device);
}

Row run_model(const Shape& shape, int iterations, const Options& o) {
  model::BertConfig config;  // vocab 30522, max_position 512, dropout 0.1, 2 labels
  config.num_hidden_layers = shape.layers;
  config.hidden_size = shape.hidden;
  config.num_attention_heads = shape.heads;
  config.intermediate_size = 4 * shape.hidden;

  torch::manual_seed(o.seed);
  glue::BertTrainState state;
  state.model = model::BertForSequenceClassification(config);
  state.module = state.model.ptr();
  // The weights are drawn on the CPU, then moved, before the optimizer sees them.
  if (!o.device.is_cpu()) state.model->to(o.device);
  state.optimizer = train::make_adamw(*state.model, train::OptimizerOptions{});
  state.scheduler = std::make_unique<train::LinearWarmupSchedule>(*state.optimizer, 0, iterations);
  state.max_grad_norm = 1.0;
  const data::Batch batch = random_batch(config.vocab_size, o.batch, o.seq, o.device);

  Row row;
  row.shape = shape;
  row.params = count_parameters(*state.model);
  row.flops = flops_per_iteration(row.params, shape, o.batch, o.seq);
  const bool progress = isatty(STDERR_FILENO);
  for (int i = 0; i < iterations; ++i) {
    if (progress) {
      fmt::print(stderr, "\r  {}: step {}/{}...", shape.name, i + 1, iterations);
      std::fflush(stderr);
    }
    bench::synchronize(o.device);  // CUDA: nothing of the previous step still queued
    report::Stopwatch watch;
    row.last_loss = task1::train_step(state, batch);
    bench::synchronize(o.device);
    row.seconds.push_back(watch.seconds());
    row.losses.push_back(row.last_loss);
    if (!std::isfinite(row.last_loss)) {
      throw Error(fmt::format("{}: the loss is {} at step {}", shape.name, row.last_loss, i + 1));
    }
  }
  if (progress) {
    fmt::print(stderr, "\r{:40}\r", "");
    std::fflush(stderr);
  }
  row.t = report::summarize(row.seconds, row.seconds.size());
  if (!o.flags.profile.empty()) {
    // Three more steps under the profiler, after the timed ones, so that its cost is in no figure.
    report::StepProfiler profiler(o.flags.profile / shape.name, "bench_task1 " + shape.name, iterations + 1,
                                  report::kProfileSteps);
    for (int64_t step = iterations + 1; step <= iterations + report::kProfileSteps; ++step) {
      profiler.before_step(step);
      task1::train_step(state, batch);
      if (profiler.after_step(step)) fmt::print("  profile of {}: {}\n", shape.name, (o.flags.profile / shape.name).string());
    }
  }
  return row;
}

// The table: fixed widths, so that each row can be printed as soon as its model is done.
constexpr const char* kHeaderFormat =
    "{:<6} {:>11} {:>8} {:>7} {:>5} {:>8} {:>7} {:>17} {:>10} {:>9} {:>9} {:>8}\n";

void print_table_header() {
  fmt::print(kHeaderFormat, "model", "L/H/A", "params", "N", "iters", "s/iter", "stdev",
             "min-max s", "examples/s", "tokens/s", "GFLOP/it", "GFLOP/s");
}

void print_row(const Row& r, const Options& o) {
  const double mean = r.t.mean;
  fmt::print("{:<6} {:>11} {:>7.2f}M {:>6.2f}M {:>5} {:>8.3f} {:>7.3f} {:>17} {:>10.1f} {:>9.0f} "
             "{:>9.1f} {:>8.1f}\n",
             r.shape.name, fmt::format("{}/{}/{}", r.shape.layers, r.shape.hidden, r.shape.heads),
             r.params.total / 1e6, r.params.encoder / 1e6,
             fmt::format("{}+{}", report::kDiscardedIterations, r.t.count), mean, r.t.stdev,
             fmt::format("{:.3f}-{:.3f}", r.t.min, r.t.max), double(o.batch) / mean,
             double(o.batch * o.seq) / mean, r.flops / 1e9, r.flops / mean / 1e9);
  std::fflush(stdout);
}

const char* kFormula =
    "FLOPs/iter = 6*N*T + 12*L*S*H*T, T = batch*seq tokens, S = seq. N = encoder parameters "
    "(embeddings,\n"
    "  pooler and classifier not counted). 6 = multiply-add x (forward + 2 backward matmuls); "
    "12*L*S*H =\n"
    "  attention QK^T and PV, 2*2*S*H per token per layer forward, x3. Elementwise work "
    "(softmax, GELU,\n"
    "  LayerNorm, dropout, clipping, AdamW) not counted.";

nlohmann::json row_json(const Row& r, const Options& o) {
  const double mean = r.t.mean;
  return {{"model", r.shape.name},
          {"num_hidden_layers", r.shape.layers},
          {"hidden_size", r.shape.hidden},
          {"num_attention_heads", r.shape.heads},
          {"intermediate_size", 4 * r.shape.hidden},
          {"parameters", r.params.total},
          {"embedding_parameters", r.params.embeddings},
          {"encoder_parameters", r.params.encoder},
          {"head_parameters", r.params.head},
          {"iterations", r.seconds.size()},
          {"iterations_timed", r.t.count},
          {"seconds", r.seconds},
          {"seconds_per_iteration",
           {{"mean", mean}, {"stdev", r.t.stdev}, {"min", r.t.min}, {"max", r.t.max}}},
          {"examples_per_second", double(o.batch) / mean},
          {"tokens_per_second", double(o.batch * o.seq) / mean},
          {"flops_per_iteration", r.flops},
          {"gflops_per_second", r.flops / mean / 1e9},
          {"losses", r.losses},
          {"last_loss", r.last_loss}};
}

int run(const Options& o) {
  if (o.iters <= static_cast<int>(report::kDiscardedIterations) ||
      o.base_iters <= static_cast<int>(report::kDiscardedIterations)) {
    throw Error(fmt::format("--iters and --base_iters must be at least {}: the first step is "
                            "discarded",
                            report::kDiscardedIterations + 1));
  }
  if (o.batch < 1) throw Error("--batch must be at least 1");
  if (o.seq < 1 || o.seq > 512) throw Error("--seq must be between 1 and 512 (max_position_embeddings)");

  report::Stopwatch total;
  const int threads = train::configure_threads(o.threads);
  const train::BlasInfo blas = train::detect_blas();
  fmt::print("bench_task1: task1::train_step (forward+loss, backward, clip 1.0, AdamW, schedule, "
             "zero_grad){}\n", o.flags.plain ? ", the BERT written the obvious way (--plain)" : "");
  fmt::print("  runtime  {}\n", train::describe_runtime());
  fmt::print("  input    random tokens, batch {} x seq {} = {} tokens/iter, dropout 0.1, "
             "vocab 30522, intermediate 4H\n",
             o.batch, o.seq, o.batch * o.seq);
  fmt::print("  timing   first iteration discarded, mean of the rest (iters column: discarded+timed)\n");
  const bench::DeviceInfo device = bench::describe_device(o.device);
  if (o.device.is_cuda()) fmt::print("{}", bench::device_line(device));
  fmt::print("\n");
  print_table_header();
  std::fflush(stdout);

  std::vector<Row> rows;
  for (const Shape& shape : kShapes) {
    if (std::find(o.models.begin(), o.models.end(), shape.name) == o.models.end()) continue;
    rows.push_back(run_model(shape, shape.name == "base" ? o.base_iters : o.iters, o));
    print_row(rows.back(), o);
  }
  const double wall = total.seconds();

  fmt::print("\nparams: all parameters; N: encoder parameters (non-embedding, without pooler and "
             "classifier)\n{}\n",
             kFormula);
  if (rows.size() > 1) {
    fmt::print("relative s/iter:");
    for (const Row& r : rows) fmt::print(" {} {:.2f}", r.shape.name, r.t.mean / rows.front().t.mean);
    fmt::print(" (x {})\n", rows.front().shape.name);
  }
  if (o.device.is_cuda()) {
    std::vector<std::pair<std::string, double>> achieved;
    for (const Row& r : rows) achieved.emplace_back(r.shape.name, r.flops / r.t.mean);
    bench::print_peak_shares(device, achieved);
  }
  fmt::print("total wall time {:.1f} s\n", wall);

  if (!o.json.empty()) {
    nlohmann::json models = nlohmann::json::array();
    for (const Row& r : rows) {
      models.push_back(row_json(r, o));
      if (const auto share = bench::peak_share(device, r.flops / r.t.mean)) {
        models.back()["share_of_nominal_fp32_peak"] = *share;
      }
    }
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    nlohmann::json j = {
        {"benchmark", "bench_task1"},
        {"step", "dtlab::task1::train_step (solutions/task1)"},
        {"ops", o.flags.plain ? "plain" : "kit"},
        {"environment",
         {{"hostname", host}, {"libtorch", TORCH_VERSION}, {"blas", blas.name},
          {"blas_library", blas.path}, {"threads", threads}}},
        {"settings",
         {{"batch", o.batch}, {"seq", o.seq}, {"iters", o.iters}, {"base_iters", o.base_iters},
          {"discarded_iterations", report::kDiscardedIterations}, {"seed", o.seed},
          {"dropout", 0.1}, {"max_grad_norm", 1.0}, {"learning_rate", 5e-5}}},
        {"flops_formula", "6*N*T + 12*L*S*H*T; N = encoder parameters, T = batch*seq, S = seq"},
        {"models", models},
        {"wall_seconds", wall}};
    if (o.device.is_cuda()) j["environment"]["device"] = bench::device_json(device);
    if (o.json == "-") {
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
  return dtlab::run_main("bench_task1", [&]() -> int {
    Options o;
    CLI::App app{"Times task 1's training step (dtlab::task1::train_step) on random tokens for "
                 "the small BERT shapes"};
    app.add_option("--models", o.models, "Comma-separated subset of tiny,mini,small,base")
        ->delimiter(',')
        ->check(CLI::IsMember({"tiny", "mini", "small", "base"}))
        ->capture_default_str();
    app.add_option("--iters", o.iters, "Steps per model (first discarded), except base")
        ->capture_default_str();
    app.add_option("--base_iters", o.base_iters,
                   "Steps for base L12/H768 (first discarded); ~45 s each at batch 64 x 128 on "
                   "2 cores, the first ~2x")
        ->capture_default_str();
    app.add_option("--batch", o.batch, "Examples per step")->capture_default_str();
    app.add_option("--seq", o.seq, "Sequence length")->capture_default_str();
    app.add_option("--threads", o.threads, "Intra-op threads (0: the cores available)")
        ->capture_default_str();
    app.add_option("--seed", o.seed, "Seed of the weights and the random batch")->capture_default_str();
    app.add_option("--json", o.json, "Also write the figures as JSON to this file ('-': stdout)");
    dtlab::bench::add_step_bench_flags(app, o.flags, "torch::nn::Linear, torch::dropout");
    if (auto stop = dtlab::parse_flags(app, argc, argv)) return *stop;
    o.device = dtlab::bench::bench_device(o.flags.device);  // before anything runs: exit 2 at once
    if (o.flags.versus_plain > 0) {
      return dtlab::bench::versus_plain(
          {"--iters", std::to_string(o.iters), "--base_iters", std::to_string(o.base_iters), "--batch",
           std::to_string(o.batch), "--seq", std::to_string(o.seq), "--threads", std::to_string(o.threads),
           "--seed", std::to_string(o.seed), "--device", o.flags.device},
          o.models, o.flags.versus_plain);
    }
    if (o.flags.plain) dtlab::model::use_ops(dtlab::model::Ops::plain);
    return run(o);
  }, /*keep_memory=*/!plain);
}
