// The model-agnostic training core (train/): step counts in closed form, the order of the
// kit's step (sync after backward, the "gradients are synchronised" hook before clipping), and
// the loop on a toy model that is neither BERT nor GPT-2.
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/utils/clip_grad.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <malloc.h>

#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/train/loop.h"
#include "dtlab/train/step.h"
#include "dist_test_util.h"
#include "test_util.h"

// Everything in a namespace named after the file (no anonymous namespace): the unit suites share
// one binary, compiled in groups of files (Note [Unity builds] in cmake/Dtlab.cmake), so helpers
// must not collide, and a TEST_F class must not derive from a type of an anonymous namespace.
namespace train_core_test {

using namespace dtlab;

// y = 3 x + 1 on the points x = 0, 0.1, ..., as a data set of (input, target) rows.
class LineDataset final : public train::Dataset {
 public:
  explicit LineDataset(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  data::Batch batch(const std::vector<int64_t>& rows) const override {
    std::vector<float> x;
    for (int64_t r : rows) x.push_back(0.1f * static_cast<float>(r));
    data::Batch b;
    b.input_ids = torch::tensor(x).unsqueeze(1);  // a float "input" is enough for a toy loss
    b.labels = 3 * b.input_ids + 1;
    return b;
  }

 private:
  int64_t n_;
};

train::TrainState line_state(double max_grad_norm, int64_t total_steps) {
  torch::manual_seed(0);
  auto linear = std::make_shared<torch::nn::LinearImpl>(1, 1);
  train::TrainState state;
  state.module = linear;
  state.loss = [linear](const data::Batch& b) { return (linear->forward(b.input_ids) - b.labels).pow(2).mean(); };
  state.max_grad_norm = max_grad_norm;
  state.optimizer = train::make_adamw(*linear, {0.1, 0.0, 1e-8});
  state.scheduler = std::make_unique<train::LinearWarmupSchedule>(*state.optimizer, 0, total_steps);
  return state;
}

// A strategy that records when it is called and what the gradients were.
class RecordingSync final : public train::GradientSync {
 public:
  explicit RecordingSync(std::vector<std::string>& calls) : calls_(calls) {}
  void before_backward() override { calls_.push_back("before_backward"); }
  double after_backward() override {
    calls_.push_back("after_backward");
    return 0.25;
  }
  std::string describe() const override { return "recording"; }

 private:
  std::vector<std::string>& calls_;
};

double grad_norm(const torch::nn::Module& m) {
  double sum = 0;
  for (const auto& p : m.parameters()) sum += p.grad().pow(2).sum().item<double>();
  return std::sqrt(sum);
}

// A shard is ceil(N / world) examples; an epoch is ceil(shard / batch) steps.
TEST(PlanSteps, EpochsAndStepsInClosedForm) {
  train::LoopPlan plan;
  plan.batch_per_rank = 2;
  train::plan_steps(plan, /*dataset_size=*/10, /*world=*/4, /*num_epochs=*/3, /*max_steps=*/-1);
  EXPECT_EQ(plan.total_steps, 6);  // shard 3 -> 2 steps per epoch, 3 epochs
  EXPECT_EQ(plan.epochs, 3);
  train::plan_steps(plan, 10, 4, 3, /*max_steps=*/5);
  EXPECT_EQ(plan.total_steps, 5);
  EXPECT_EQ(plan.epochs, 3);  // ceil(5 / 2)
  train::plan_steps(plan, 0, 1, 3, -1);
  EXPECT_EQ(plan.total_steps, 0);
}

// Sync comes after backward, the hook after sync and before clipping (it sees the unclipped
// gradient), and the step leaves no gradient behind.
TEST(TrainingStep, SyncAfterBackwardThenHookThenClipAndStep) {
  train::TrainState state = line_state(/*max_grad_norm=*/1e-3, 10);
  std::vector<std::string> calls;
  RecordingSync sync(calls);
  const LineDataset data(8);
  const std::vector<int64_t> rows = {5, 6, 7};
  const data::Batch batch = data.batch(rows);
  const torch::Tensor before = state.module->parameters()[0].detach().clone();
  double seen_norm = 0;
  const train::StepResult r = train::training_step(
      state, {1, 1, &rows, &batch}, sync, [&](const train::StepInput& in, const torch::nn::Module& m) {
        calls.push_back("after_sync step " + std::to_string(in.step));
        EXPECT_EQ(*in.rows, rows);
        seen_norm = grad_norm(m);
      });
  EXPECT_EQ(calls, (std::vector<std::string>{"before_backward", "after_backward", "after_sync step 1"}));
  EXPECT_GT(seen_norm, 1e-3);  // the hook ran before clipping to 1e-3
  EXPECT_DOUBLE_EQ(r.comm_seconds, 0.25);
  EXPECT_GT(r.loss, 0.0f);
  EXPECT_FALSE(torch::equal(before, state.module->parameters()[0]));  // the optimiser stepped
  for (const auto& p : state.module->parameters()) {
    EXPECT_TRUE(!p.grad().defined() || p.grad().abs().sum().item<double>() == 0.0);  // zero_grad
  }
}

// clip_gradients is LibTorch's clip_grad_norm_ in the same operations (so bit for bit the same on
// one device), written so that the norms of gradients on several devices meet on one (a pipeline
// on GPUs): the arithmetic a GPU run depends on, checked here on the CPU against LibTorch's.
TEST(TrainingStep, ClipGradientsIsClipGradNormBitForBit) {
  torch::manual_seed(3);
  for (const double max_norm : {0.5, 1e6}) {  // clipped, and left alone (coefficient clamped to 1)
    for (const int count : {1, 4}) {
      std::vector<torch::Tensor> ours, theirs;
      for (int i = 0; i < count; ++i) {
        torch::Tensor p = torch::zeros({3 + i, 5}, torch::requires_grad());
        p.mutable_grad() = torch::randn({3 + i, 5}) * (i + 1);
        torch::Tensor q = torch::zeros({3 + i, 5}, torch::requires_grad());
        q.mutable_grad() = p.grad().clone();
        ours.push_back(p);
        theirs.push_back(q);
      }
      ours.push_back(torch::zeros({2}, torch::requires_grad()));  // no gradient: skipped by both
      theirs.push_back(torch::zeros({2}, torch::requires_grad()));
      train::clip_gradients(ours, max_norm);
      torch::nn::utils::clip_grad_norm_(theirs, max_norm);
      for (int i = 0; i < count; ++i) {
        EXPECT_TRUE(torch::equal(ours[i].grad(), theirs[i].grad())) << "max_norm " << max_norm << ", " << count;
      }
      EXPECT_FALSE(ours.back().grad().defined());
    }
  }
}

TEST(TrainLoop, EvaluatingWithoutAnAfterEpochIsAnError) {
  const LineDataset data(8);
  train::LoopPlan plan;
  plan.batch_per_rank = 4;
  plan.sampler = {data.size(), 1, 0, true, 0};
  train::plan_steps(plan, data.size(), 1, 1, -1);
  train::TrainState state = line_state(0, plan.total_steps);
  const auto sync = train::no_sync();
  train::Run run = train::plan_run("toy", nullptr);
  report::Results results("toy", nlohmann::json::object(), nlohmann::json::object());
  EXPECT_THROW_WITH(train::train_loop(run, state, data, plan, train::kit_step(*sync), nullptr, results,
                                      test::fresh_temp_dir("train-core-eval") / "results.json"),
                    dtlab::Error, "no after_epoch");
}

// The loop on one process: every step recorded with its epoch and examples, an evaluation per
// epoch, and the loss falls on a line a linear model can fit.
TEST(TrainLoop, RecordsEveryStepAndEvaluatesEveryEpoch) {
  const LineDataset data(16);
  train::LoopPlan plan;
  plan.batch_per_rank = 4;
  plan.sampler = {data.size(), 1, 0, /*shuffle=*/true, /*seed=*/3};
  plan.log_first_steps = 0;
  plan.progress_seconds = 1e9;
  train::plan_steps(plan, data.size(), 1, /*num_epochs=*/5, -1);
  train::TrainState state = line_state(0, plan.total_steps);
  const auto sync = train::no_sync();
  train::Run run = train::plan_run("toy", nullptr);
  report::Results results("toy", nlohmann::json::object(), nlohmann::json::object());
  int evaluations = 0;
  const std::filesystem::path out = test::fresh_temp_dir("train-core") / "results.json";
  train::train_loop(run, state, data, plan, train::kit_step(*sync), [&](train::TrainState&, int epoch) {
    ++evaluations;
    train::EvalResult r;
    r.loss = epoch;
    r.examples = 16;
    r.metrics["epoch_seen"] = epoch;
    return r;
  }, results, out);

  ASSERT_EQ(results.iterations().size(), 20u);  // 16 / 4 = 4 steps, 5 epochs
  EXPECT_EQ(results.iterations().front().epoch, 1);
  EXPECT_EQ(results.iterations().back().epoch, 5);
  EXPECT_EQ(results.iterations().back().step, 20);
  EXPECT_EQ(results.iterations().front().examples, 4);
  EXPECT_EQ(evaluations, 5);
  ASSERT_EQ(results.epochs().size(), 5u);
  EXPECT_DOUBLE_EQ(*results.epochs()[2].eval_loss, 3.0);
  EXPECT_DOUBLE_EQ(results.epochs()[2].eval_metrics.at("epoch_seen"), 3.0);
  for (size_t e = 1; e < results.epochs().size(); ++e) {
    EXPECT_LT(results.epochs()[e].train_loss, results.epochs()[e - 1].train_loss) << "epoch " << e + 1;
  }
  EXPECT_LT(results.epochs().back().train_loss, results.epochs().front().train_loss / 3);
  EXPECT_TRUE(std::filesystem::exists(out));  // saved after every epoch by rank 0
}

TEST(TrainLoop, ANonFiniteLossStopsTheRunNamingTheStep) {
  const LineDataset data(8);
  train::LoopPlan plan;
  plan.batch_per_rank = 4;
  plan.sampler = {data.size(), 1, 0, true, 0};
  plan.log_first_steps = 0;
  plan.evaluate = false;
  train::plan_steps(plan, data.size(), 1, 2, -1);
  train::TrainState state = line_state(0, plan.total_steps);
  const auto sync = train::no_sync();
  int calls = 0;
  const train::StepFunction step = [&](train::TrainState&, const train::StepInput&) {
    return train::StepResult{++calls == 3 ? std::nanf("") : 1.0f, 0.0};
  };
  train::Run run = train::plan_run("toy", nullptr);
  report::Results results("toy", nlohmann::json::object(), nlohmann::json::object());
  EXPECT_THROW_WITH(train::train_loop(run, state, data, plan, step, nullptr, results,
                                      test::fresh_temp_dir("train-core-nan") / "results.json"),
                    dtlab::Error, "rank 0: the loss is nan at step 3");
}

// Note [A non-finite loss]: at step 1 no update has happened, so a NaN loss is the checkpoint's
// or the data's, never the learning rate's. The toy model computes y = a x + b plus 0 x the sum
// of a [2, 3] table; `bad` puts a value in the table (or in the labels).
struct TableModelImpl : torch::nn::Module {
  TableModelImpl() {
    finite = register_parameter("finite", torch::ones({2}));  // before the table: skipped
    table = register_parameter("table", torch::zeros({2, 3}));
    line = register_module("line", torch::nn::Linear(1, 1));
  }
  torch::Tensor finite, table;
  torch::nn::Linear line{nullptr};
};

std::string loss_error_at_first_step(float table_value, float label_value, const std::string& forward_reading = "") {
  const LineDataset data(8);
  train::LoopPlan plan;
  plan.batch_per_rank = 4;
  plan.sampler = {data.size(), 1, 0, true, 0};
  plan.log_first_steps = 0;
  plan.evaluate = false;
  train::plan_steps(plan, data.size(), 1, 1, -1);
  torch::manual_seed(0);
  auto model = std::make_shared<TableModelImpl>();
  {
    torch::NoGradGuard no_grad;
    model->table[1][2] = table_value;  // flat offset 5: index [1, 2], not [0, 5]
  }
  train::TrainState state;
  state.module = model;
  state.loss = [model, label_value](const data::Batch& b) {
    const torch::Tensor fit = (model->line->forward(b.input_ids) - b.labels * label_value).pow(2).mean();
    return fit + 0 * model->table.sum() + 0 * model->finite.sum();
  };
  state.max_grad_norm = 0;
  state.optimizer = train::make_adamw(*model, {0.1, 0.0, 1e-8});
  state.scheduler = std::make_unique<train::LinearWarmupSchedule>(*state.optimizer, 0, plan.total_steps);
  if (!forward_reading.empty()) state.forward_reading = [forward_reading] { return forward_reading; };
  const auto sync = train::no_sync();
  train::Run run = train::plan_run("toy", nullptr);
  report::Results results("toy", nlohmann::json::object(), nlohmann::json::object());
  try {
    train::train_loop(run, state, data, plan, train::kit_step(*sync), nullptr, results,
                      test::fresh_temp_dir("train-core-nan-step1") / "results.json");
  } catch (const dtlab::Error& e) {
    return e.what();
  }
  return "";
}

TEST(TrainLoop, ANonFiniteLossAtStepOneNamesTheFirstNonFiniteWeight) {
  EXPECT_EQ(loss_error_at_first_step(std::nanf(""), 1.0f),
            "rank 0: the loss is nan at step 1, before any update: the weights are not finite (table "
            "holds nan (first at [1, 2])): check the checkpoint (--model_name_or_path)");
  // 0 x -inf is a NaN whose sign the platform chooses: only the weights' words are compared.
  const std::string inf = loss_error_at_first_step(-std::numeric_limits<float>::infinity(), 1.0f);
  EXPECT_NE(inf.find("at step 1, before any update: the weights are not finite (table holds -inf (first at [1, 2]))"),
            std::string::npos) << inf;
}

TEST(TrainLoop, ANonFiniteLossAtStepOneWithFiniteWeightsPointsAtTheData) {
  EXPECT_EQ(loss_error_at_first_step(0.0f, std::nanf("")),
            "rank 0: the loss is nan at step 1, before any update, with every weight finite: check the data");
  EXPECT_EQ(loss_error_at_first_step(0.0f, 1.0f), "") << "finite weights and data train without an error";
}

// FSDP's forward reads what the student's gathers put together (TrainState::forward_reading, Note
// [A gather that puts pieces in the wrong place] in shard/sharded_trainer.cpp): named instead of the data;
// a non-finite weight at rest is still the checkpoint's.
TEST(TrainLoop, ANonFiniteLossWithAWrongGatherNamesWhatTheForwardRead) {
  EXPECT_EQ(loss_error_at_first_step(0.0f, std::nanf(""), "slot 1 of X is not rank 1's piece"),
            "rank 0: the loss is nan at step 1, before any update, with every weight finite at rest: from step 1 on "
            "the forward read whole parameters that are not the model's (slot 1 of X is not rank 1's piece)");
  EXPECT_NE(loss_error_at_first_step(std::nanf(""), 1.0f, "slot 1 of X").find("check the checkpoint"),
            std::string::npos);
}

// Runs train_loop with `step` on `world` ranks, threads of this process whose Gloo groups meet
// in one HashStore (tests/dist_test_util.h); returns each rank's error ("" when it finished).
// A rank that waits for a gone one gives up after test::kRankTimeout.
// `prepare` may change a rank's state before the loop starts.
std::vector<std::string> loop_on_ranks(int world, const std::function<float(int rank, int64_t step)>& loss_of,
                                       const std::function<void(int rank, train::TrainState&)>& prepare = nullptr) {
  test::single_threaded_torch();
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<train::Run> runs;
  for (int rank = 0; rank < world; ++rank) runs.push_back(train::plan_run("toy", nullptr));
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      test::single_threaded_torch();
      try {
        auto options = c10d::ProcessGroupGloo::Options::create(test::kRankTimeout);
        options->devices = {c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")};
        auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);
        train::Run& run = runs[static_cast<size_t>(rank)];
        run.group = dist::wrap_process_group(pg, rank, world, test::kRankTimeout, "gloo");
        const LineDataset data(16);
        train::LoopPlan plan;
        plan.batch_per_rank = 4;
        plan.sampler = {data.size(), world, rank, true, 0};
        plan.log_first_steps = 0;
        plan.evaluate = false;
        train::plan_steps(plan, data.size(), world, 2, -1);
        train::TrainState state = [&] {
          std::lock_guard<std::mutex> lock(test::global_generator_mutex());
          return line_state(0, plan.total_steps);
        }();
        if (prepare) prepare(rank, state);
        const train::StepFunction step = [&](train::TrainState&, const train::StepInput& in) {
          return train::StepResult{loss_of(rank, in.step), 0.0};
        };
        report::Results results("toy", nlohmann::json::object(), nlohmann::json::object());
        train::train_loop(run, state, data, plan, step, nullptr, results,
                          test::fresh_temp_dir("train-core-ranks-" + std::to_string(rank)) / "results.json");
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(rank)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;  // runs (and their groups) close only now, once every rank is done
}

// Note [A non-finite loss]: a NaN on rank 1 stops every rank at the end of its epoch with the
// same words, naming rank 1 and the step, instead of rank 0 timing out in a collective rank 1
// left. Two ranks at once are both named, with their values.
TEST(TrainLoop, ANonFiniteLossOnOneRankStopsEveryRankWithTheSameWords) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string> one = loop_on_ranks(2, [](int rank, int64_t step) {
    return rank == 1 && step == 3 ? std::nanf("") : 1.0f;  // 2 steps an epoch: step 3 is epoch 2's first
  });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0)
      << "a rank waited for another one";
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(one[static_cast<size_t>(rank)],
              "rank 1: the loss is nan at step 3: lower --learning_rate or check the data")
        << "rank " << rank;
  }
  const std::vector<std::string> both = loop_on_ranks(2, [](int rank, int64_t step) {
    if (step == 4) return std::nanf("");  // later: not the first
    return step == 2 ? (rank == 0 ? std::numeric_limits<float>::infinity() : std::nanf("")) : 1.0f;
  });
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(both[static_cast<size_t>(rank)],
              "ranks 0, 1: the loss is inf, nan at step 2: lower --learning_rate or check the data")
        << "rank " << rank;
  }
}

// Note [A non-finite loss] at step 1 with ranks: each rank's weights are gathered, so every rank
// names rank 1's NaN weight (though rank 0's own are finite), or says that all were finite.
TEST(TrainLoop, ANonFiniteLossAtStepOneOnRanksNamesEveryRanksNonFiniteWeight) {
  const auto nan_at_step_one = [](int rank, int64_t step) { return rank == 1 && step == 1 ? std::nanf("") : 1.0f; };
  const std::vector<std::string> bad_weight = loop_on_ranks(2, nan_at_step_one, [](int rank, train::TrainState& state) {
    torch::NoGradGuard no_grad;
    if (rank == 1) state.module->named_parameters()["bias"].fill_(std::nanf(""));
  });
  const std::vector<std::string> finite = loop_on_ranks(2, nan_at_step_one);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(bad_weight[static_cast<size_t>(rank)],
              "rank 1: the loss is nan at step 1, before any update: the weights are not finite (rank 1: "
              "bias holds nan (first at [0])): check the checkpoint (--model_name_or_path)")
        << "rank " << rank;
    EXPECT_EQ(finite[static_cast<size_t>(rank)],
              "rank 1: the loss is nan at step 1, before any update, with every weight finite: check the data")
        << "rank " << rank;
  }
}

}  // namespace train_core_test

// Note [Keeping freed memory]: after keep_freed_memory() a 64 MiB tensor (above glibc's largest
// dynamic mmap threshold, 32 MiB) comes from the heap, not from a fresh mapping, and freeing it
// leaves the heap as large as it was.
TEST(KeepFreedMemory, ActivationSizedBlocksComeFromTheHeapAndStay) {
#if defined(DTLAB_ADDRESS_SANITIZER) || defined(DTLAB_THREAD_SANITIZER)
  GTEST_SKIP() << "a sanitizer's allocator replaces glibc's malloc, whose heap this test reads (mallinfo2)";
#endif
  dtlab::keep_freed_memory();
  const size_t mapped_before = mallinfo2().hblkhd;
  size_t heap_with_tensor = 0;
  {
    const torch::Tensor t = torch::ones({16 << 20});  // 64 MiB of floats, written
    EXPECT_EQ(mallinfo2().hblkhd, mapped_before) << "the tensor got its own mapping";
    heap_with_tensor = mallinfo2().arena;
    EXPECT_GE(heap_with_tensor, size_t(64) << 20);
  }
  EXPECT_EQ(mallinfo2().arena, heap_with_tensor) << "freeing the tensor gave the heap back to the kernel";
}
