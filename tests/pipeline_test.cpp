// The pipeline runtime (common/pipeline): schedules, balance, the timeline and the stage workers,
// driven as the students' Pipe will drive them: for each clock tick, submit every task of the
// tick, then collect each. The fill-drain schedule is built here, in the test, never by the kit.
#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/linear.h>
#include <torch/autograd.h>
#include <torch/types.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dtlab/core/device.h"
#include "dtlab/core/error.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/pipeline/balance.h"
#include "dtlab/pipeline/gpt2_layout.h"
#include "dtlab/pipeline/schedule.h"
#include "dtlab/pipeline/timeline.h"
#include "dtlab/pipeline/workers.h"
#include "fill_drain.h"
#include "test_util.h"

// One namespace for the whole file: unit suites are compiled in groups (Note [Unity builds]),
// so nothing here may leak into the next file.
namespace pipeline_test {

using dtlab::pipeline::Pass;
using dtlab::pipeline::Schedule;
using dtlab::pipeline::Stage;
using dtlab::pipeline::StageWorkers;
using dtlab::pipeline::StageWorkersOptions;
using dtlab::pipeline::Task;
using dtlab::pipeline::check_schedule;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

using dtlab::test::fill_drain;

// The students' compute loop, forward: inputs[i] is micro-batch i's input to stage 0; returns
// the last stage's outputs.
std::vector<torch::Tensor> run_forward(StageWorkers& workers, const std::vector<torch::Tensor>& inputs) {
  const int m = static_cast<int>(inputs.size()), n = workers.num_stages();
  std::vector<std::vector<torch::Tensor>> act(m, std::vector<torch::Tensor>(n + 1));
  for (int i = 0; i < m; ++i) act[i][0] = inputs[i];
  for (const auto& tick : fill_drain(m, n)) {
    for (const Task& t : tick) workers.submit(t, Pass::kForward, act[t.micro][t.stage]);
    for (const Task& t : tick) act[t.micro][t.stage + 1] = workers.collect(t.stage);
  }
  std::vector<torch::Tensor> out;
  for (int i = 0; i < m; ++i) out.push_back(act[i][n]);
  return out;
}

// Backward through the reversed schedule: grads[i] is the loss's gradient w.r.t. micro-batch i's
// last output; returns the gradients w.r.t. the stage-0 inputs.
std::vector<torch::Tensor> run_backward(StageWorkers& workers, const std::vector<torch::Tensor>& grads) {
  const int m = static_cast<int>(grads.size()), n = workers.num_stages();
  std::vector<std::vector<torch::Tensor>> g(m, std::vector<torch::Tensor>(n + 1));
  for (int i = 0; i < m; ++i) g[i][n] = grads[i];
  for (const auto& tick : dtlab::pipeline::reversed(fill_drain(m, n))) {
    for (const Task& t : tick) workers.submit(t, Pass::kBackward, g[t.micro][t.stage + 1]);
    for (const Task& t : tick) g[t.micro][t.stage] = workers.collect(t.stage);
  }
  std::vector<torch::Tensor> out;
  for (int i = 0; i < m; ++i) out.push_back(g[i][0]);
  return out;
}

StageWorkersOptions with_threads(int threads) {
  StageWorkersOptions options;
  options.threads_per_stage = threads;
  return options;
}


// ---------------------------------------------------------------------------------------------
// Schedules

TEST(ScheduleCheck, AcceptsFillDrainAndItsReversalAsBackwardForEveryShapeUpTo8) {
  for (int m = 1; m <= 8; ++m) {
    for (int n = 1; n <= 8; ++n) {
      const Schedule forward = fill_drain(m, n);
      EXPECT_NO_THROW(check_schedule(forward, m, n, Pass::kForward)) << m << " x " << n;
      EXPECT_NO_THROW(check_schedule(dtlab::pipeline::reversed(forward), m, n, Pass::kBackward)) << m << " x " << n;
      // The forward order run as backward breaks every backward dependency (n > 1).
      if (n > 1) {
        EXPECT_THROW(check_schedule(forward, m, n, Pass::kBackward), dtlab::Error) << m << " x " << n;
      }
    }
  }
}

TEST(ScheduleCheck, ReversedRunsTheForwardTicksBackwardsKeepingEachTick) {
  const Schedule forward = fill_drain(3, 2);  // [(0,0)] [(0,1),(1,0)]... as built, by micro-batch
  const Schedule backward = dtlab::pipeline::reversed(forward);
  ASSERT_EQ(backward.size(), forward.size());
  for (size_t k = 0; k < forward.size(); ++k) EXPECT_EQ(backward[k], forward[forward.size() - 1 - k]);
}

TEST(ScheduleCheck, RejectsAnEmptyScheduleAsMissingTheFirstTask) {
  EXPECT_THROW_WITH(check_schedule({}, 2, 3, Pass::kForward), dtlab::Error,
                    "task (micro-batch 0, stage 0) is missing");
  EXPECT_THROW_WITH(check_schedule({}, 0, 3, Pass::kForward), dtlab::Error, "at least 1 micro-batch");
}

TEST(ScheduleCheck, RejectsShiftedTicksNamingTheTickAndTask) {
  // 2 x 2 fill-drain: [(0,0)] [(0,1),(1,0)] [(1,1)].
  // Tick 2 moved one tick earlier: stage 1 twice in tick 1.
  EXPECT_THROW_WITH(check_schedule({{{0, 0}}, {{0, 1}, {1, 0}, {1, 1}}}, 2, 2, Pass::kForward), dtlab::Error,
                    "forward schedule, tick 1: stage 1 appears twice, in (micro-batch 0, stage 1) and "
                    "(micro-batch 1, stage 1)");
  // One task moved one tick earlier: it runs with the task it depends on.
  EXPECT_THROW_WITH(check_schedule({{{0, 0}, {0, 1}}, {{1, 0}}, {{1, 1}}}, 2, 2, Pass::kForward), dtlab::Error,
                    "tick 0: task (micro-batch 0, stage 1) needs (micro-batch 0, stage 0) to have run at an "
                    "earlier tick, but that runs at tick 0");
  // Ticks 1 and 2 swapped.
  EXPECT_THROW_WITH(check_schedule({{{0, 0}}, {{1, 1}}, {{0, 1}, {1, 0}}}, 2, 2, Pass::kForward), dtlab::Error,
                    "tick 1: task (micro-batch 1, stage 1) needs (micro-batch 1, stage 0) to have run at an "
                    "earlier tick, but that runs at tick 2");
}

TEST(ScheduleCheck, RejectsDuplicateMissingOutOfRangeAndBackwardOrder) {
  Schedule s = fill_drain(2, 2);
  s.push_back({{1, 1}});
  EXPECT_THROW_WITH(check_schedule(s, 2, 2, Pass::kForward), dtlab::Error,
                    "tick 3: task (micro-batch 1, stage 1) runs twice, at tick 2 and tick 3");
  EXPECT_THROW_WITH(check_schedule({{{0, 0}}, {{0, 1}, {1, 0}}}, 2, 2, Pass::kForward), dtlab::Error,
                    "task (micro-batch 1, stage 1) is missing");
  EXPECT_THROW_WITH(check_schedule({{{0, 0}}, {{0, 1}, {2, 0}}}, 2, 2, Pass::kForward), dtlab::Error,
                    "tick 1: task (micro-batch 2, stage 0) is out of range: micro-batches are 0..1, stages 0..1");
  EXPECT_THROW_WITH(check_schedule(fill_drain(2, 2), 2, 2, Pass::kBackward), dtlab::Error,
                    "backward schedule, tick 0: task (micro-batch 0, stage 0) needs (micro-batch 0, stage 1) to "
                    "have run at an earlier tick, but that runs at tick 1");
}

// ---------------------------------------------------------------------------------------------
// Balance

TEST(BalanceBySize, ClosedFormCases) {
  using dtlab::pipeline::balance_by_size;
  EXPECT_EQ(balance_by_size({1, 1, 1, 1, 1, 1, 1, 1}, 4), (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(balance_by_size({1, 1, 1, 1, 4}, 2), (std::vector<int>{4, 1}));  // 4 | 4 beats 3 | 5
  // One huge layer: it stands alone and sets the maximum, 100.
  EXPECT_EQ(balance_by_size({1, 1, 100, 1, 1}, 3), (std::vector<int>{2, 1, 2}));
  EXPECT_EQ(balance_by_size({5, 7, 9}, 1), (std::vector<int>{3}));
  EXPECT_EQ(balance_by_size({5, 7, 9}, 3), (std::vector<int>{1, 1, 1}));
  // Ties go to the earliest split: three equal layers on two stages, 1 | 2 (max 2) over 2 | 1.
  EXPECT_EQ(balance_by_size({1, 1, 1}, 2), (std::vector<int>{1, 2}));
  EXPECT_EQ(balance_by_size({0, 0, 0}, 2), (std::vector<int>{1, 2}));
}

TEST(BalanceBySize, IsTheEarliestOptimalSplitAgainstBruteForce) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int layers = 1 + static_cast<int>(rng() % 8);
    const int stages = 1 + static_cast<int>(rng() % layers);
    std::vector<int64_t> sizes;
    for (int l = 0; l < layers; ++l) sizes.push_back(static_cast<int64_t>(rng() % 20));
    // Every composition of `layers` into `stages` positive parts, in lexicographic order: the
    // first with the smallest maximum is the expected answer.
    std::vector<int> best;
    int64_t best_max = -1;
    std::function<void(std::vector<int>&, int)> walk = [&](std::vector<int>& parts, int left) {
      if (static_cast<int>(parts.size()) == stages) {
        if (left != 0) return;
        int64_t mx = 0;
        size_t l = 0;
        for (int p : parts) {
          int64_t sum = 0;
          for (int q = 0; q < p; ++q) sum += sizes[l++];
          mx = std::max(mx, sum);
        }
        if (best_max < 0 || mx < best_max) best_max = mx, best = parts;
        return;
      }
      for (int p = 1; p <= left; ++p) {
        parts.push_back(p);
        walk(parts, left - p);
        parts.pop_back();
      }
    };
    std::vector<int> parts;
    walk(parts, layers);
    EXPECT_EQ(dtlab::pipeline::balance_by_size(sizes, stages), best) << "trial " << trial;
  }
}

TEST(BalanceBySize, ErrorsAndTheLayerToStageMap) {
  using dtlab::pipeline::balance_by_size;
  EXPECT_THROW_WITH(balance_by_size({1, 2}, 3), dtlab::Error, "cannot place 2 layers on 3 stages");
  EXPECT_THROW_WITH(balance_by_size({1, 2}, 0), dtlab::Error, "over 0 stages");
  EXPECT_THROW_WITH(balance_by_size({1, -2, 3}, 2), dtlab::Error, "layer 1 has a negative size (-2)");
  EXPECT_EQ(dtlab::pipeline::stage_of_layers({2, 1, 3}), (std::vector<int>{0, 0, 1, 2, 2, 2}));
  EXPECT_THROW_WITH(dtlab::pipeline::stage_of_layers({2, 0}), dtlab::Error, "balance[1] is 0");

  using dtlab::pipeline::check_balance;
  EXPECT_NO_THROW(check_balance({2, 3}, 5));
  EXPECT_THROW_WITH(check_balance({2, 2}, 5), dtlab::Error, "sums to 4 layers but the model has 5");
  EXPECT_THROW_WITH(check_balance({2, 0, 3}, 5), dtlab::Error, "balance[1] is 0");
  EXPECT_THROW_WITH(check_balance({3, -1, 3}, 5), dtlab::Error, "balance[1] is -1");
  EXPECT_THROW_WITH(check_balance({1, 1, 1}, 2), dtlab::Error, "3 stages but the model has only 2 layers");
  EXPECT_THROW_WITH(check_balance({}, 2), dtlab::Error, "empty");
}

// ---------------------------------------------------------------------------------------------
// Timeline

TEST(PipelineTimeline, MeasuresBusySpanBubbleAndPeaks) {
  using dtlab::pipeline::StageEvent;
  dtlab::pipeline::Timeline t(2);
  EXPECT_EQ(t.bubble_fraction(), 0.0);
  // Two stages, one micro-batch each way: each stage works 2 of the span's 4 seconds.
  t.append({0, 0, Pass::kForward, 0.0, 1.0});
  t.append({1, 0, Pass::kForward, 1.0, 2.0});
  t.append({1, 0, Pass::kBackward, 2.0, 3.0});
  t.append({0, 0, Pass::kBackward, 3.0, 4.0});
  EXPECT_DOUBLE_EQ(t.busy(0), 2.0);
  EXPECT_DOUBLE_EQ(t.span(), 4.0);
  EXPECT_DOUBLE_EQ(t.bubble_fraction(), 0.5);
  t.note_live_bytes(1, 300);
  t.note_live_bytes(1, 100);
  EXPECT_EQ(t.peak_bytes(1), 300);
  EXPECT_EQ(t.peak_bytes(0), 0);
  const nlohmann::json j = t.to_json();
  ASSERT_EQ(j["events"].size(), 4u);
  EXPECT_EQ(j["events"][2]["pass"], "backward");
  EXPECT_EQ(j["events"][2]["stage"], 1);
  EXPECT_EQ(j["peak_bytes"], (nlohmann::json{0, 300}));
  EXPECT_DOUBLE_EQ(j["bubble_fraction"].get<double>(), 0.5);
  EXPECT_THROW_WITH(t.append({2, 0, Pass::kForward, 0, 1}), dtlab::Error, "stage 2 is not in this timeline of 2");
  t.clear();
  EXPECT_TRUE(t.events().empty());
  EXPECT_EQ(t.peak_bytes(1), 0);
  // GPipe's bubble (n - 1) / (m + n - 1).
  EXPECT_DOUBLE_EQ(dtlab::pipeline::ideal_bubble_fraction(4, 2), 1.0 / 5);
  EXPECT_DOUBLE_EQ(dtlab::pipeline::ideal_bubble_fraction(1, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(dtlab::pipeline::ideal_bubble_fraction(8, 1), 0.0);
}

// ---------------------------------------------------------------------------------------------
// Transparency: the pipelined model computes what the unsplit one does.

// Stage functions running layers [begin, end) of `model` (sharing its modules).
std::vector<Stage> split(const torch::nn::Sequential& model, const std::vector<int>& balance) {
  std::vector<Stage> stages;
  size_t layer = 0;
  for (int count : balance) {
    torch::nn::Sequential part;
    for (int q = 0; q < count; ++q) part->push_back(*(model->begin() + static_cast<long>(layer++)));
    stages.push_back({[part](const torch::Tensor& x) mutable { return part->forward(x); }, torch::kCPU});
  }
  return stages;
}

std::vector<torch::Tensor> grads_of(const torch::nn::Module& m) {
  std::vector<torch::Tensor> g;
  for (const auto& p : m.parameters()) g.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  return g;
}

void zero_grads(torch::nn::Module& m) {
  for (auto& p : m.parameters()) {
    if (p.grad().defined()) p.mutable_grad() = torch::Tensor();
  }
}

TEST(PipelineTransparency, SequentialSplitInto2And3StagesMatchesTheWholeModel) {
  torch::manual_seed(3);
  torch::nn::Sequential model(torch::nn::Linear(6, 16), torch::nn::GELU(), torch::nn::LayerNorm(torch::nn::LayerNormOptions({16})),
                              torch::nn::Linear(16, 16), torch::nn::GELU(), torch::nn::Linear(16, 5),
                              torch::nn::LayerNorm(torch::nn::LayerNormOptions({5})));
  model->to(torch::kFloat64);
  std::vector<int64_t> sizes;
  for (const auto& layer : *model) {
    int64_t count = 0;
    for (const auto& p : layer.ptr()->parameters()) count += p.numel();
    sizes.push_back(count);
  }
  for (int n : {2, 3}) {
    StageWorkers workers(split(model, dtlab::pipeline::balance_by_size(sizes, n)));
    for (int m : {1, 3, 4, 8}) {
      for (int64_t batch : {1, 7, 32}) {
        SCOPED_TRACE("stages " + std::to_string(n) + ", micro-batches " + std::to_string(m) + ", batch " +
                     std::to_string(batch));
        const torch::Tensor x = torch::randn({batch, 6}, torch::kFloat64).requires_grad_();
        const torch::Tensor target = torch::randn({batch, 5}, torch::kFloat64);
        zero_grads(*model);
        torch::nn::functional::mse_loss(model->forward(x), target).backward();
        const std::vector<torch::Tensor> expected_grads = grads_of(*model);
        const torch::Tensor expected_x_grad = x.grad().clone();
        const torch::Tensor expected = model->forward(x).detach();
        zero_grads(*model);

        // torch::chunk as torch.chunk: ceil(batch / m) rows each, so fewer than m micro-batches
        // when they do not divide (7 rows in 4 chunks: 2, 2, 2, 1; 1 row: one chunk).
        const std::vector<torch::Tensor> chunks = x.detach().chunk(m);
        workers.clear();
        const torch::Tensor output = torch::cat(run_forward(workers, chunks));
        EXPECT_TRUE(torch::allclose(output, expected, /*rtol=*/1e-12, /*atol=*/1e-12));
        EXPECT_EQ(workers.recorded(0), static_cast<int>(chunks.size()));

        // The loss's gradient w.r.t. the whole output, cut the way the output was.
        const torch::Tensor out = output.detach().requires_grad_();
        torch::nn::functional::mse_loss(out, target).backward();
        const std::vector<torch::Tensor> input_grads = run_backward(workers, out.grad().chunk(m));
        const std::vector<torch::Tensor> got = grads_of(*model);
        ASSERT_EQ(got.size(), expected_grads.size());
        for (size_t p = 0; p < got.size(); ++p) {
          ASSERT_TRUE(got[p].defined()) << "parameter " << p;
          EXPECT_LT((got[p] - expected_grads[p]).abs().max().item<double>(), 1e-10) << "parameter " << p;
        }
        EXPECT_TRUE(torch::allclose(torch::cat(input_grads), expected_x_grad, 1e-10, 1e-12));
        for (int s = 0; s < n; ++s) {
          EXPECT_EQ(workers.recorded(s), 0) << "backward frees every record";
          EXPECT_EQ(workers.live_bytes(s), 0);
        }
      }
    }
  }
}

TEST(PipelineTransparency, SharedParameterGradientsFromTwoStageThreadsAddUp) {
  // Both stages multiply by the same weight, so both workers accumulate into one .grad, at the
  // same ticks (Note [Backward pipelining]).
  torch::manual_seed(4);
  const torch::Tensor w = (torch::randn({96, 96}, torch::kFloat64) / 10).requires_grad_();
  const int m = 24;
  const torch::Tensor x = torch::randn({m * 4, 96}, torch::kFloat64);
  torch::matmul(torch::matmul(x, w), w).sum().backward();
  const torch::Tensor expected = w.grad().clone();
  w.mutable_grad() = torch::Tensor();
  auto stage = [w](const torch::Tensor& in) { return torch::matmul(in, w); };
  StageWorkers workers({{stage, torch::kCPU}, {stage, torch::kCPU}}, with_threads(1));
  const std::vector<torch::Tensor> outputs = run_forward(workers, x.chunk(m));
  std::vector<torch::Tensor> ones;
  for (const auto& o : outputs) ones.push_back(torch::ones_like(o));
  run_backward(workers, ones);
  EXPECT_LT((w.grad() - expected).abs().max().item<double>(), 1e-9);
}

TEST(PipelineTransparency, PeakActivationBytesGrowWithMicroBatches) {
  // Stage s: [rows, 4] -> [rows, 4] doubles; a micro-batch of r rows records r*4*8 bytes of
  // input and as many of output. Fill-drain runs every forward before any backward, so the peak
  // is m micro-batches' worth.
  const torch::Tensor w = torch::ones({4}, torch::kFloat64).requires_grad_();
  auto stage = [w](const torch::Tensor& in) { return in * w; };
  StageWorkers workers({{stage, torch::kCPU}, {stage, torch::kCPU}});
  for (int m : {1, 2, 4}) {
    workers.clear();
    const torch::Tensor x = torch::randn({m * 3, 4}, torch::kFloat64);
    const std::vector<torch::Tensor> outputs = run_forward(workers, x.chunk(m));
    const int64_t per_micro = 2 * 3 * 4 * 8;
    EXPECT_EQ(workers.live_bytes(1), m * per_micro);
    run_backward(workers, x.chunk(m));
    EXPECT_EQ(workers.live_bytes(1), 0);
    EXPECT_EQ(workers.timeline().peak_bytes(0), m * per_micro) << "m " << m;
    EXPECT_EQ(workers.timeline().peak_bytes(1), m * per_micro) << "m " << m;
  }
}

// ---------------------------------------------------------------------------------------------
// Workers: grad mode, concurrency, errors, threads.

TEST(PipelineWorkers, TheCallersGradModeRunsTheStageAndDecidesWhatIsRecorded) {
  std::mutex mu;
  std::vector<std::pair<bool, bool>> seen;  // (grad mode inside the stage, output has a grad_fn)
  const torch::Tensor w = torch::ones({2}).requires_grad_();
  auto stage = [&, w](const torch::Tensor& in) {
    torch::Tensor out = in * w;
    std::lock_guard<std::mutex> lock(mu);
    seen.emplace_back(at::GradMode::is_enabled(), out.grad_fn() != nullptr);
    return out;
  };
  StageWorkers workers({{stage, torch::kCPU}, {stage, torch::kCPU}});
  std::vector<torch::Tensor> outputs;
  {
    torch::NoGradGuard no_grad;  // the workers' threads still have grad mode on
    outputs = run_forward(workers, {torch::ones({1, 2}), torch::ones({1, 2})});
  }
  EXPECT_EQ(seen, (std::vector<std::pair<bool, bool>>(4, {false, false})));
  EXPECT_FALSE(outputs[0].requires_grad());
  EXPECT_EQ(workers.recorded(0), 0);
  EXPECT_EQ(workers.recorded(1), 0);
  workers.submit({0, 1}, Pass::kBackward, torch::ones({1, 2}));
  EXPECT_THROW_WITH(workers.collect(1), dtlab::Error,
                    "stage 1, micro-batch 0 (backward): no forward of this micro-batch is recorded");

  workers.clear();
  seen.clear();
  outputs = run_forward(workers, {torch::ones({1, 2}), torch::ones({1, 2})});
  EXPECT_EQ(seen, (std::vector<std::pair<bool, bool>>(4, {true, true})));
  EXPECT_FALSE(outputs[0].requires_grad()) << "results are detached";
  EXPECT_EQ(workers.recorded(0), 2);
  EXPECT_EQ(workers.recorded(1), 2);
}

// What the sleeping stages saw: (micro, stage, pass) with start and end times.
struct Span {
  int micro, stage;
  Pass pass;
  double start, end;
};

TEST(PipelineWorkers, StagesRunConcurrentlyInPipelinedOrderForwardAndBackward) {
  constexpr int m = 4, n = 2;
  constexpr auto kSleep = std::chrono::milliseconds(60);
  const double sleep_s = std::chrono::duration<double>(kSleep).count();
  std::mutex mu;
  std::vector<Span> log;
  const Clock::time_point t0 = Clock::now();
  auto since = [t0] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  std::vector<Stage> stages;
  for (int s = 0; s < n; ++s) {
    const torch::Tensor w = torch::ones({1}, torch::kFloat64).requires_grad_();
    // The micro-batch travels as the value: input i, output i * 1. Backward sleeps in a hook of
    // the stage's output, which autograd runs on the worker's thread.
    stages.push_back({[&, s, w](const torch::Tensor& in) {
                        const int micro = static_cast<int>(in.item<double>());
                        const double start = since();
                        std::this_thread::sleep_for(kSleep);
                        torch::Tensor out = in * w;
                        {
                          std::lock_guard<std::mutex> lock(mu);
                          log.push_back({micro, s, Pass::kForward, start, since()});
                        }
                        out.register_hook([&, s, micro](const torch::Tensor& g) {
                          const double start = since();
                          std::this_thread::sleep_for(kSleep);
                          std::lock_guard<std::mutex> lock(mu);
                          log.push_back({micro, s, Pass::kBackward, start, since()});
                          return g;
                        });
                        return out;
                      },
                      torch::kCPU});
  }
  StageWorkers workers(std::move(stages));
  std::vector<torch::Tensor> inputs, grads;
  for (int i = 0; i < m; ++i) {
    inputs.push_back(torch::full({1}, i, torch::kFloat64));
    grads.push_back(torch::ones({1}, torch::kFloat64));
  }
  const double sequential = m * n * sleep_s;  // one task at a time; pipelined: (m + n - 1) sleeps
  Clock::time_point start = Clock::now();
  run_forward(workers, inputs);
  const double forward_s = seconds_since(start);
  start = Clock::now();
  run_backward(workers, grads);
  const double backward_s = seconds_since(start);
  EXPECT_LT(forward_s, 0.8 * sequential);
  EXPECT_LT(backward_s, 0.8 * sequential);

  for (Pass pass : {Pass::kForward, Pass::kBackward}) {
    SCOPED_TRACE(dtlab::pipeline::pass_name(pass));
    std::vector<Span> spans;
    for (const Span& e : log) {
      if (e.pass == pass) spans.push_back(e);
    }
    ASSERT_EQ(spans.size(), static_cast<size_t>(m * n));
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
    // Start order: tick by tick (forward: i + j ascending; backward: descending).
    std::vector<int> ticks, sorted_ticks;
    for (const Span& e : spans) ticks.push_back(pass == Pass::kForward ? e.micro + e.stage : m + n - 2 - (e.micro + e.stage));
    sorted_ticks = ticks;
    std::sort(sorted_ticks.begin(), sorted_ticks.end());
    EXPECT_EQ(ticks, sorted_ticks);
    // Stage 1 of micro-batch i runs while stage 0 works on micro-batch i + 1.
    auto find = [&](int micro, int stage) {
      return *std::find_if(spans.begin(), spans.end(), [&](const Span& e) { return e.micro == micro && e.stage == stage; });
    };
    for (int i = 0; i + 1 < m; ++i) {
      const Span a = find(i, 1), b = find(i + 1, 0);
      EXPECT_LT(std::max(a.start, b.start), std::min(a.end, b.end)) << "micro-batch " << i << " stage 1 and micro-batch "
                                                                     << i + 1 << " stage 0 do not overlap";
    }
  }
  // The runtime's own timeline saw the same tasks; its bubble is GPipe's (n-1)/(m+n-1) give or
  // take the driver's overhead.
  const auto events = workers.timeline().events();
  EXPECT_EQ(events.size(), static_cast<size_t>(2 * m * n));
  EXPECT_NEAR(workers.timeline().bubble_fraction(), dtlab::pipeline::ideal_bubble_fraction(m, n), 0.1);
  EXPECT_NEAR(workers.timeline().busy(0), 2 * m * sleep_s, 0.1);
}

TEST(PipelineWorkers, AStageErrorIsRethrownNamingStageAndMicroBatchAndTheWorkersRecover) {
  std::atomic<bool> fail{true};
  auto stage0 = [](const torch::Tensor& in) { return in * 2; };
  auto stage1 = [&](const torch::Tensor& in) {
    if (fail && in.item<double>() == 2 * 2) throw std::runtime_error("cannot digest micro-batch two");
    return in + 1;
  };
  StageWorkers workers({{stage0, torch::kCPU}, {stage1, torch::kCPU}});
  std::vector<torch::Tensor> inputs;
  for (int i = 0; i < 4; ++i) inputs.push_back(torch::full({1}, i, torch::kFloat64));
  const Clock::time_point start = Clock::now();
  EXPECT_THROW_WITH(run_forward(workers, inputs), dtlab::Error,
                    "stage 1, micro-batch 2 (forward): cannot digest micro-batch two");
  EXPECT_LT(seconds_since(start), 1.0);

  fail = false;
  workers.clear();
  const std::vector<torch::Tensor> outputs = run_forward(workers, inputs);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(outputs[i].item<double>(), 2 * i + 1);
  EXPECT_EQ(workers.timeline().events().size(), 8u) << "clear() dropped the failed step's events";
}

// x -> x, sleeping kSlowBackward in backward before it passes the gradient on: what runs after it
// in the stage's backward (the parameters' AccumulateGrad) happens that much later.
constexpr auto kSlowBackward = std::chrono::milliseconds(300);
struct SlowBackward : torch::autograd::Function<SlowBackward> {
  static torch::Tensor forward(torch::autograd::AutogradContext*, const torch::Tensor& x) { return x.clone(); }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*, torch::autograd::variable_list g) {
    std::this_thread::sleep_for(kSlowBackward);
    return {g[0]};
  }
};
// x -> x; its backward throws while `failing` is set, before anything reaches a parameter.
std::atomic<bool> failing_backward{false};
struct FailingBackward : torch::autograd::Function<FailingBackward> {
  static torch::Tensor forward(torch::autograd::AutogradContext*, const torch::Tensor& x) { return x.clone(); }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*, torch::autograd::variable_list g) {
    if (failing_backward) throw std::runtime_error("this backward fails");
    return {g[0]};
  }
};

// a step fails at stage 0 while stage 1's backward still runs (the tick's
// tasks are collected in stage order, as clock_cycles lists them). The caller clears the workers
// and the gradients and runs the next step: its gradients must be that step's alone, not
// accumulate the failed step's backward that was still running when clear() returned.
TEST(PipelineWorkers, ClearWaitsForARunningTaskSoTheNextStepsGradientsAreItsOwn) {
  torch::manual_seed(5);
  torch::nn::Linear first(4, 4), second(4, 4);
  auto stage0 = [first](const torch::Tensor& x) mutable { return FailingBackward::apply(first->forward(x)); };
  auto stage1 = [second](const torch::Tensor& x) mutable { return SlowBackward::apply(second->forward(x)); };
  StageWorkers workers({{stage0, torch::kCPU}, {stage1, torch::kCPU}}, with_threads(1));
  auto zero = [&] {
    zero_grads(*first);
    zero_grads(*second);
  };

  // The failed step: both micro-batches forward; backward of micro-batch 1 at stage 1; then the
  // tick {(1, 0), (0, 1)}: stage 0 fails at once while stage 1 sleeps in its backward.
  const std::vector<torch::Tensor> outputs = run_forward(workers, {torch::randn({2, 4}), torch::randn({2, 4})});
  workers.submit({1, 1}, Pass::kBackward, torch::ones_like(outputs[1]));
  const torch::Tensor into_stage1 = workers.collect(1);
  failing_backward = true;
  workers.submit({1, 0}, Pass::kBackward, into_stage1);
  workers.submit({0, 1}, Pass::kBackward, torch::ones_like(outputs[0]));
  EXPECT_THROW_WITH(workers.collect(0), dtlab::Error, "stage 0, micro-batch 1 (backward): this backward fails");
  failing_backward = false;
  workers.clear();  // after an error, as workers.h says
  zero();

  // The next step, against the unsplit model on the same batch.
  const torch::Tensor x = torch::randn({4, 4}), weight = torch::randn({4, 4});
  const std::vector<torch::Tensor> out = run_forward(workers, x.chunk(2));
  run_backward(workers, weight.chunk(2));
  const std::vector<torch::Tensor> got = grads_of(*first), got2 = grads_of(*second);
  zero();
  (second->forward(first->forward(x)) * weight).sum().backward();
  const std::vector<torch::Tensor> want = grads_of(*first), want2 = grads_of(*second);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(torch::allclose(got[i], want[i], 1e-5, 1e-6)) << "stage 0, parameter " << i;
    EXPECT_TRUE(torch::allclose(got2[i], want2[i], 1e-5, 1e-6))
        << "stage 1, parameter " << i << ": the failed step's backward, still running at clear(), added to it";
  }
}

// clear() waits for a running task within collect_timeout; a task that does not return by then is
// an error naming it (a stage call cannot be interrupted), and clear() can be called again.
TEST(PipelineWorkers, ClearNamesATaskStillRunningAfterTheTimeout) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto entered = std::make_shared<std::atomic<bool>>(false);
  auto blocking = [released, entered](const torch::Tensor& in) {
    *entered = true;
    (void)released.wait_for(std::chrono::seconds(20));  // a bound, so a broken test cannot hang forever
    return in + 1;
  };
  StageWorkersOptions options;
  options.collect_timeout = std::chrono::milliseconds(200);
  StageWorkers workers({{[](const torch::Tensor& in) { return in; }, torch::kCPU}, {blocking, torch::kCPU}}, options);
  workers.submit({0, 1}, Pass::kForward, torch::zeros({1}));
  const Clock::time_point limit = Clock::now() + std::chrono::seconds(5);
  while (!*entered && Clock::now() < limit) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(*entered) << "the stage never started its task";
  const Clock::time_point start = Clock::now();
  EXPECT_THROW_WITH(workers.clear(), dtlab::Error,
                    "clear: stage 1, micro-batch 0 (forward) is still running after 200 ms");
  EXPECT_GE(seconds_since(start), 0.19);
  EXPECT_LT(seconds_since(start), 2.0);
  release.set_value();
  workers.clear();
  workers.submit({0, 1}, Pass::kForward, torch::zeros({1}));
  EXPECT_EQ(workers.collect(1).item<float>(), 1.0f);
}

TEST(PipelineWorkers, DtlabErrorClassesSurviveTheTrip) {
  StageWorkers workers({{[](const torch::Tensor&) -> torch::Tensor { throw dtlab::NotImplemented("TODO(pipe): split"); },
                         torch::kCPU},
                        {[](const torch::Tensor&) -> torch::Tensor { throw dtlab::DistError("peer gone"); }, torch::kCPU}});
  workers.submit({0, 0}, Pass::kForward, torch::ones({1}));
  workers.submit({0, 1}, Pass::kForward, torch::ones({1}));
  try {
    workers.collect(0);
    ADD_FAILURE() << "no exception";
  } catch (const dtlab::NotImplemented& e) {
    EXPECT_EQ(std::string(e.what()), "TODO(pipe): split (in stage 0, micro-batch 0 (forward))");
  }
  EXPECT_THROW_WITH(workers.collect(1), dtlab::DistError, "stage 1, micro-batch 0 (forward): peer gone");
  EXPECT_THROW_WITH(workers.collect(1), dtlab::Error, "stage 1 has no task to collect");
  EXPECT_THROW_WITH(workers.submit({0, 2}, Pass::kForward, torch::ones({1})), dtlab::Error,
                    "names a stage that does not exist: there are 2 stages");
}

TEST(PipelineWorkers, AStageThatNeverReturnsTimesOutNamingStageMicroBatchAndTimeout) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto blocking = [released](const torch::Tensor& in) {
    (void)released.wait_for(std::chrono::seconds(20));  // a bound, so a broken test cannot hang forever
    return in + 1;
  };
  StageWorkersOptions options;
  options.collect_timeout = std::chrono::milliseconds(200);
  StageWorkers workers({{blocking, torch::kCPU}}, options);
  workers.submit({0, 0}, Pass::kForward, torch::zeros({1}));
  const Clock::time_point start = Clock::now();
  EXPECT_THROW_WITH(workers.collect(0), dtlab::Error,
                    "stage 0, micro-batch 0 (forward): no result after 200 ms (StageWorkersOptions::collect_timeout)");
  const double waited = seconds_since(start);
  EXPECT_GE(waited, 0.19);
  EXPECT_LT(waited, 2.0);
  release.set_value();
  EXPECT_EQ(workers.collect(0).item<float>(), 1.0f) << "after a timeout the task stays pending";
}

TEST(PipelineWorkers, DestructionDropsQueuedTasksAndDoesNotWaitForThem) {
  constexpr auto kSleep = std::chrono::milliseconds(100);
  std::atomic<int> calls{0};
  auto slow = [&calls, kSleep](const torch::Tensor& in) {
    ++calls;
    std::this_thread::sleep_for(kSleep);
    return in;
  };
  Clock::time_point start;
  {
    StageWorkers workers({{slow, torch::kCPU}, {slow, torch::kCPU}});
    for (int i = 0; i < 8; ++i) {
      workers.submit({i, 0}, Pass::kForward, torch::zeros({1}));
      workers.submit({i, 1}, Pass::kForward, torch::zeros({1}));
    }
    // Destroy while each worker runs its first task and 7 more wait in its queue.
    const Clock::time_point limit = Clock::now() + std::chrono::seconds(5);
    while (calls < 2 && Clock::now() < limit) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(calls, 2);
    start = Clock::now();
  }
  // The running tasks finish (at most 100 ms); the 14 queued ones never start.
  EXPECT_LT(seconds_since(start), 0.35);
  EXPECT_EQ(calls, 2);
}

// The threads of the process (Linux: one entry per thread in /proc/self/task).
int process_threads() {
  int count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++count;
  return count;
}

// Waits (up to 2 s) until the process's thread count holds still: the OpenMP team of a thread
// that ended (an earlier test's worker) exits on its own, after that thread is joined.
void settle_threads() {
  const Clock::time_point limit = Clock::now() + std::chrono::seconds(2);
  int last = process_threads();
  while (Clock::now() < limit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const int now = process_threads();
    if (now == last) return;
    last = now;
  }
}

TEST(PipelineWorkers, ThreadsPerStageAreSetInsideEachStage) {
  settle_threads();
  const int caller_threads = at::get_num_threads();
  struct Seen {
    int num_threads = 0;
    int team = 0;  // threads of the OpenMP team a LibTorch kernel ran on
  };
  // at::parallel_for in this file would run serially: only code compiled with -fopenmp (LibTorch's
  // own kernels) forks a team. So the probe runs a large element-wise kernel, whose first parallel
  // region on this worker thread makes libgomp start the worker's own team: team - 1 new threads.
  auto probe = [](Seen* seen) {
    return [seen](const torch::Tensor& in) {
      const int before = process_threads();  // before this thread's first parallel kernel
      seen->num_threads = at::get_num_threads();
      const torch::Tensor y = torch::ones({1 << 22}).exp();
      seen->team = process_threads() - before + 1;
      return in + y[0];
    };
  };
  // Two runtimes with different counts, the second created before the first runs anything: a
  // worker that left LibTorch's lazy initialisation for later would take the last count set.
  Seen one, three;
  StageWorkers a({{probe(&one), torch::kCPU}}, with_threads(1));
  StageWorkers b({{probe(&three), torch::kCPU}}, with_threads(3));
  EXPECT_EQ(b.threads_per_stage(), 3);
  a.submit({0, 0}, Pass::kForward, torch::zeros({1}));
  a.collect(0);
  b.submit({0, 0}, Pass::kForward, torch::zeros({1}));
  b.collect(0);
  EXPECT_EQ(one.num_threads, 1);
  EXPECT_EQ(one.team, 1);
  EXPECT_EQ(three.num_threads, 3);
  EXPECT_EQ(three.team, 3);
  EXPECT_EQ(at::get_num_threads(), caller_threads) << "the caller keeps its own count";
  // The default: the caller's count over the stages, at least 1.
  StageWorkers d({{probe(&one), torch::kCPU}, {probe(&one), torch::kCPU}});
  EXPECT_EQ(d.threads_per_stage(), std::max(1, caller_threads / 2));
}

// ---------------------------------------------------------------------------------------------
// GPT-2 through the stages of Note [Stages] (model/gpt2.h).

namespace pipeline_test {
// A GPT-2 of 4 layers (embeddings, 2 blocks, head) small enough for a test to split by hand.
dtlab::model::Gpt2Config tiny_gpt2_config() {
  dtlab::model::Gpt2Config config;
  config.vocab_size = 40;
  config.n_positions = 16;
  config.n_embd = 12;
  config.n_layer = 2;
  config.n_head = 3;
  return config;
}
}  // namespace pipeline_test
using pipeline_test::tiny_gpt2_config;

TEST(PipelineGpt2, TwoStagesThreeMicroBatchesGiveTheModelsLogitsAndGradients) {
  using dtlab::model::Gpt2LMHeadModel;
  dtlab::model::Gpt2Config config = tiny_gpt2_config();
  dtlab::model::Gpt2Overrides::dropout(0.0).apply(config);
  torch::manual_seed(5);
  Gpt2LMHeadModel model(config);
  model->to(torch::kFloat64);
  model->eval();
  ASSERT_TRUE(config.tie_word_embeddings);
  const torch::Tensor ids = torch::randint(0, 40, {5, 8}, torch::kInt64);

  const torch::Tensor expected_logits = model->forward(ids).logits;
  dtlab::model::lm_loss(expected_logits, ids).backward();
  std::map<std::string, torch::Tensor> expected_grads;
  for (const auto& p : model->named_parameters()) expected_grads[p.key()] = p.value().grad().clone();
  zero_grads(*model);

  // Layers are Note [Stages]' stages, sized by parameter count (the tied weight in both).
  std::vector<int64_t> sizes;
  for (int64_t s = 0; s < model->num_stages(); ++s) {
    int64_t count = 0;
    for (const auto& [name, p] : model->stage_parameters(s)) count += p.numel();
    sizes.push_back(count);
  }
  const std::vector<int> balance = dtlab::pipeline::balance_by_size(sizes, 2);
  std::vector<Stage> stages;
  int64_t first = 0;
  for (int count : balance) {
    stages.push_back({[model, first, count](const torch::Tensor& x) mutable {
                        torch::Tensor h = x;
                        for (int64_t s = first; s < first + count; ++s) h = model->forward_stage(s, h);
                        return h;
                      },
                      torch::kCPU});
    first += count;
  }
  StageWorkers workers(std::move(stages));
  const std::vector<torch::Tensor> chunks = ids.chunk(3);  // 2, 2, 1 rows
  const torch::Tensor logits = torch::cat(run_forward(workers, chunks));
  EXPECT_TRUE(torch::allclose(logits, expected_logits.detach(), 1e-12, 1e-12));

  const torch::Tensor out = logits.detach().requires_grad_();
  dtlab::model::lm_loss(out, ids).backward();
  const std::vector<torch::Tensor> input_grads = run_backward(workers, out.grad().chunk(3));
  EXPECT_FALSE(input_grads[0].defined()) << "token ids have no gradient";
  for (const auto& p : model->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_LT((p.value().grad() - expected_grads[p.key()]).abs().max().item<double>(), 1e-10) << p.key();
  }
}

// Note [A tied weight on two devices] (model/gpt2.cpp): placing GPT-2's layers on their stages'
// devices leaves ONE embedding weight, used by the first and the last stage, and the model's
// parameters unchanged; on the CPU nothing moves. The gradient that weight then gets from two
// stage threads is the single-device one (the test above, where two workers stand in for two
// devices).
TEST(PipelineGpt2, PlacingTheLayersKeepsOneTiedWeightForTheFirstAndLastStage) {
  // Device numbers are GPUs where CUDA is present (Note [Devices]): there, device 1 may not exist
  // (seen on a one-GPU machine) and the layers would move. gpu_test's GpuPipeline tests place
  // the stages on GPUs; this test is about the CPU, where every device number is the CPU.
  if (dtlab::cuda_availability().devices > 0) GTEST_SKIP() << "CUDA GPUs here: device numbers are GPUs (gpu_test covers them)";
  dtlab::model::Gpt2Config config = tiny_gpt2_config();
  torch::manual_seed(5);
  dtlab::model::Gpt2LMHeadModel model(config);
  ASSERT_TRUE(config.tie_word_embeddings);
  std::vector<const void*> before;
  for (const auto& p : model->parameters()) before.push_back(p.unsafeGetTensorImpl());
  const std::vector<int> devices = dtlab::pipeline::gpt2_layer_devices(model, 2);
  dtlab::pipeline::place_layers(model, devices);
  std::vector<const void*> after;
  for (const auto& p : model->parameters()) after.push_back(p.unsafeGetTensorImpl());
  EXPECT_EQ(after, before) << "the same parameters, none added, none replaced";
  const auto first = model->stage_parameters(0), last = model->stage_parameters(model->num_stages() - 1);
  auto impl_of = [](const auto& named, const std::string& key) -> const void* {
    for (const auto& [name, p] : named) {
      if (name == key) return p.unsafeGetTensorImpl();
    }
    return nullptr;
  };
  ASSERT_NE(impl_of(first, "transformer.wte.weight"), nullptr);
  EXPECT_EQ(impl_of(first, "transformer.wte.weight"), impl_of(last, "transformer.wte.weight"));
  for (const auto& p : model->parameters()) EXPECT_TRUE(p.device().is_cpu());
  EXPECT_THROW_WITH(dtlab::pipeline::place_layers(model, {0, 1}), dtlab::Error, "2 devices for GPT-2's");
}

// --balance and --stages must agree (a balance of 2 stages under --stages 3
// would record 3 stages and GPipe's bubble for 3 while 2 run); the layer names the driver prints
// and the Layers carry come from one function.
TEST(PipelineGpt2, TheBalanceMustListTheStagesAndLayersHaveOneSetOfNames) {
  dtlab::model::Gpt2Config config = tiny_gpt2_config();
  const dtlab::model::Gpt2LMHeadModel model(config);  // 4 layers: embeddings, 2 blocks, head
  EXPECT_EQ(dtlab::pipeline::gpt2_layer_devices(model, 2, {1, 3}), (std::vector<int>{0, 1, 1, 1}));
  EXPECT_THROW_WITH(dtlab::pipeline::gpt2_layer_devices(model, 3, {2, 2}), dtlab::Error,
                    "--balance lists 2 stages and --stages is 3");
  EXPECT_THROW_WITH(dtlab::pipeline::gpt2_layer_devices(model, 1, {2, 2}), dtlab::Error,
                    "--balance lists 2 stages and --stages is 1");
  std::vector<std::string> names;
  for (int64_t s = 0; s < model->num_stages(); ++s) names.push_back(dtlab::pipeline::gpt2_layer_name(s, model->num_stages()));
  EXPECT_EQ(names, (std::vector<std::string>{"embeddings", "block 0", "block 1", "head"}));
}

}  // namespace pipeline_test
