// bench_pipeline: the pipeline exercise's training step (the reference solution's Pipe) on a
// GPT-2 whose two stages are balanced, as model parallelism (1 micro-batch) and as a GPipe
// pipeline (8 micro-batches), in alternating rounds in one process: the throughput ratio, the
// measured bubble against (n-1)/(m+n-1), and each stage's busy time, so that a shortfall from the
// ideal m*n/(m+n-1) can be explained. It prints figures; it never fails on speed.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "dtlab/core/main.h"
#include "dtlab/io/json_file.h"
#include "dtlab/lm/loss.h"
#include "dtlab/pipeline/gpt2_layout.h"
#include "dtlab/tasks/pipeline.h"
#include "dtlab/train/runtime.h"

namespace {

using dtlab::pipeline::Pipe;

struct Options {
  int64_t n_layer = 6, n_embd = 256, n_head = 4, vocab = 2048, batch = 32, seq = 128;
  int micro_batches = 8, rounds = 4, steps = 5;
  std::string json;
};

struct Measure {
  double seconds = 0, bubble = 0;
  std::vector<double> busy;
};

// `steps` forward + loss + backward steps through the pipe (the first, warm-up, not timed).
Measure time_steps(Pipe& pipe, const torch::Tensor& ids, const torch::Tensor& labels, const torch::Tensor& weights,
                   dtlab::model::Gpt2LMHeadModel& model, int steps) {
  Measure m;
  m.busy.assign(static_cast<size_t>(pipe.num_partitions()), 0.0);
  for (int s = 0; s <= steps; ++s) {
    const auto start = std::chrono::steady_clock::now();
    const torch::Tensor logits = pipe.forward(ids);
    const torch::Tensor leaf = logits.detach().requires_grad_(true);
    dtlab::lm::weighted_token_loss(leaf, labels, weights).backward();
    pipe.backward(leaf.grad());
    model->zero_grad();
    if (s == 0) continue;
    m.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps;
    m.bubble += pipe.timeline().bubble_fraction() / steps;
    for (int j = 0; j < pipe.num_partitions(); ++j) m.busy[static_cast<size_t>(j)] += pipe.timeline().busy(j) / steps;
  }
  return m;
}

std::string busy_text(const std::vector<double>& busy) {
  std::string s;
  for (double b : busy) s += fmt::format("{}{:.1f}", s.empty() ? "" : " / ", 1e3 * b);
  return s + " ms";
}

int run(const Options& o) {
  dtlab::model::Gpt2Config c;
  c.n_layer = o.n_layer;
  c.n_embd = o.n_embd;
  c.n_head = o.n_head;
  c.vocab_size = o.vocab;
  c.n_positions = std::max<int64_t>(o.seq, 128);
  c.resid_pdrop = c.embd_pdrop = c.attn_pdrop = 0;
  torch::manual_seed(42);
  dtlab::model::Gpt2LMHeadModel model(c);
  model->train();
  const torch::Tensor ids = torch::randint(o.vocab, {o.batch, o.seq}, torch::kInt64);
  const torch::Tensor labels = torch::randint(o.vocab, {o.batch, o.seq}, torch::kInt64);
  const torch::Tensor weights = torch::ones({o.batch, o.seq});
  const std::vector<int> devices = dtlab::pipeline::gpt2_layer_devices(model, 2);
  auto mp = dtlab::pipeline::prepare_pipeline_parallel(model, devices, 1);
  auto pp = dtlab::pipeline::prepare_pipeline_parallel(model, devices, o.micro_batches);
  const int n = 2, m = o.micro_batches;
  fmt::print("bench_pipeline: GPT-2 L{} H{} A{} vocab {}, batch {} x {}, 2 stages ({}), {} intra-op thread(s) per "
             "stage\n  {}\n", c.n_layer, c.n_embd, c.n_head, c.vocab_size, o.batch, o.seq,
             fmt::join(devices, ","), dtlab::pipeline::default_threads_per_stage(n),
             dtlab::train::describe_runtime());
  fmt::print("  ideal speed-up of {} micro-batches over model parallel: m*n/(m+n-1) = {:.2f}; GPipe's bubble {:.2f}\n",
             m, double(m * n) / double(m + n - 1), dtlab::pipeline::ideal_bubble_fraction(m, n));
  std::vector<double> ratios;
  nlohmann::json rounds = nlohmann::json::array();
  for (int r = 1; r <= o.rounds; ++r) {
    const Measure a = time_steps(*mp, ids, labels, weights, model, o.steps);
    const Measure b = time_steps(*pp, ids, labels, weights, model, o.steps);
    ratios.push_back(a.seconds / b.seconds);
    fmt::print("  round {}: model parallel {:.1f} ms/step (bubble {:.2f}, busy {}), pipeline m={} {:.1f} ms/step "
               "(bubble {:.2f}, busy {}): pipeline/model-parallel throughput {:.2f}x\n",
               r, 1e3 * a.seconds, a.bubble, busy_text(a.busy), m, 1e3 * b.seconds, b.bubble, busy_text(b.busy),
               ratios.back());
    rounds.push_back({{"model_parallel_seconds", a.seconds}, {"model_parallel_bubble", a.bubble},
                      {"pipeline_seconds", b.seconds}, {"pipeline_bubble", b.bubble}, {"pipeline_busy", b.busy},
                      {"ratio", ratios.back()}});
  }
  std::vector<double> sorted = ratios;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                          : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
  fmt::print("median pipeline/model-parallel throughput over {} alternating rounds: {:.2f}x (goal 1.6x, ideal {:.2f}x)\n",
             o.rounds, median, double(m * n) / double(m + n - 1));
  if (!o.json.empty()) {
    dtlab::io::write_json_file(o.json, {{"bench", "bench_pipeline"}, {"micro_batches", m}, {"stages", n},
                                        {"median_ratio", median}, {"rounds", rounds}});
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return dtlab::run_main("bench_pipeline", [&]() -> int {
    Options o;
    CLI::App app{"Time the pipeline exercise's step: model parallel against GPipe, alternating rounds"};
    app.add_option("--n_layer", o.n_layer, "GPT-2 blocks");
    app.add_option("--n_embd", o.n_embd, "Width");
    app.add_option("--n_head", o.n_head, "Attention heads");
    app.add_option("--vocab", o.vocab, "Vocabulary size");
    app.add_option("--batch", o.batch, "Rows per step");
    app.add_option("--seq", o.seq, "Tokens per row");
    app.add_option("--micro_batches", o.micro_batches, "Micro-batches of the pipeline");
    app.add_option("--rounds", o.rounds, "Alternating rounds");
    app.add_option("--steps", o.steps, "Timed steps per mode per round (after one warm-up step)");
    app.add_option("--json", o.json, "Also write the figures to this file");
    if (auto stop = dtlab::parse_flags(app, argc, argv)) return *stop;
    return run(o);
  });
}
