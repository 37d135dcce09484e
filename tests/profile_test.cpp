// The profiler behind --profile (report/profile.h): self times from nested ranges, phases from
// the scopes around them, and the files it writes of real LibTorch steps, on this thread and on
// the pipeline's stage workers.
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adamw.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <set>

#include "dtlab/io/file.h"
#include "dtlab/io/json_file.h"
#include "dtlab/pipeline/workers.h"
#include "dtlab/report/profile.h"
#include "dtlab/train/optimizer.h"
#include "test_util.h"

namespace profile_test_detail {

using dtlab::report::OperatorTime;
using dtlab::report::Phase;
using dtlab::report::ProfiledRange;

const OperatorTime* find(const std::vector<OperatorTime>& times, const std::string& name, Phase phase) {
  for (const auto& t : times) {
    if (t.name == name && t.phase == phase) return &t;
  }
  return nullptr;
}

// A small model's real step: forward, backward, the kit's AdamW (its scope marks the update).
void one_step(torch::nn::Linear& layer, dtlab::train::AdamW& optimizer) {
  const torch::Tensor x = torch::randn({64, 32});
  const torch::Tensor loss = layer->forward(x).pow(2).mean();
  loss.backward();
  optimizer.step();
  optimizer.zero_grad();
}

struct ProfiledRun {
  std::vector<int64_t> closed_at;  // the steps whose after_step closed the window
  std::string close_line;          // what close() said at the end
};

// `steps` steps of a small model under a profiler whose window is [first, first + window).
ProfiledRun run_steps(const std::filesystem::path& dir, const std::string& what, int64_t first, int64_t window,
              int64_t steps) {
  torch::manual_seed(0);
  torch::nn::Linear layer(32, 16);
  dtlab::train::AdamW optimizer(layer->parameters(), torch::optim::AdamWOptions(1e-3));
  dtlab::report::StepProfiler profiler(dir, what, first, window);
  ProfiledRun run;
  for (int64_t step = 1; step <= steps; ++step) {
    profiler.before_step(step);
    one_step(layer, optimizer);
    if (profiler.after_step(step)) run.closed_at.push_back(step);
  }
  run.close_line = profiler.close();
  return run;
}

}  // namespace profile_test_detail

using namespace profile_test_detail;

TEST(ProfileTest, SelfTimeIsTotalLessChildrenAndScopesSetThePhase) {
  // Thread 1: a forward op with a child; a backward node whose op is backward; an update scope.
  // Thread 2: an op that overlaps thread 1's in time but is not its child.
  const std::vector<ProfiledRange> ranges = {
      {"aten::linear", 1, 0, 10, false, false},
      {"aten::addmm", 1, 2, 8, false, false},
      {"AddmmBackward0", 1, 20, 30, true, false},
      {"aten::mm", 1, 21, 29, false, false},
      {"dtlab::update", 1, 40, 50, false, true},
      {"aten::mul_", 1, 41, 44, false, false},
      {"aten::mul_", 1, 45, 47, false, false},
      {"aten::mm", 2, 1, 5, false, false},
      // A collective started on thread 1 and ended by another thread: it overlaps the ops above
      // without nesting, and must change none of their times.
      {"gloo:all_reduce", 1, 5, 45, false, true, true},
  };
  const auto times = dtlab::report::operator_times(ranges);
  const OperatorTime* linear = find(times, "aten::linear", Phase::forward);
  ASSERT_NE(linear, nullptr);
  EXPECT_DOUBLE_EQ(linear->total_us, 10);
  EXPECT_DOUBLE_EQ(linear->self_us, 4);  // 10 less addmm's 6
  const OperatorTime* mm_backward = find(times, "aten::mm", Phase::backward);
  ASSERT_NE(mm_backward, nullptr);
  EXPECT_DOUBLE_EQ(mm_backward->self_us, 8);
  const OperatorTime* mm_forward = find(times, "aten::mm", Phase::forward);  // thread 2's
  ASSERT_NE(mm_forward, nullptr);
  EXPECT_DOUBLE_EQ(mm_forward->self_us, 4);
  const OperatorTime* mul = find(times, "aten::mul_", Phase::update);
  ASSERT_NE(mul, nullptr);
  EXPECT_EQ(mul->calls, 2);
  EXPECT_DOUBLE_EQ(mul->self_us, 5);
  // Scopes are not operators.
  EXPECT_EQ(find(times, "AddmmBackward0", Phase::backward), nullptr);
  EXPECT_EQ(find(times, "dtlab::update", Phase::update), nullptr);
  EXPECT_EQ(times.front().name, "aten::mm");  // largest self time first (8)
  const std::string table = dtlab::report::format_operator_table(times, 2, "a test");
  EXPECT_NE(table.find("backward: 0.0 ms per step"), std::string::npos) << table;
  EXPECT_NE(table.find("aten::addmm"), std::string::npos) << table;
  EXPECT_EQ(table.find("gloo:all_reduce"), std::string::npos) << table;
  // In the trace it has a row of its own, beside its thread's.
  const auto dir = dtlab::test::fresh_temp_dir("profile_async");
  dtlab::report::write_chrome_trace(dir / "trace.json", ranges, "test");
  int linear_row = -1, collective_row = -1;
  const nlohmann::json trace = dtlab::io::read_json_file(dir / "trace.json");
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    if (e.at("name") == "aten::linear") linear_row = e.at("tid").get<int>();
    if (e.at("name") == "gloo:all_reduce") collective_row = e.at("tid").get<int>();
  }
  EXPECT_GE(linear_row, 0);
  EXPECT_EQ(collective_row, 1000 + linear_row);
}

TEST(ProfileTest, WritesTraceAndTableOfTheWindowOnly) {
  const auto dir = dtlab::test::fresh_temp_dir("profile_window");
  const ProfiledRun run = run_steps(dir, "a linear layer", 2, 2, 4);
  EXPECT_EQ(run.closed_at, (std::vector<int64_t>{3}));
  EXPECT_EQ(run.close_line, "") << "a window that closed was announced already";
  const nlohmann::json trace = dtlab::io::read_json_file(dir / "trace.json");
  std::set<std::string> names;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X") names.insert(e.at("name").get<std::string>());
  }
  EXPECT_TRUE(names.count("aten::addmm") || names.count("aten::linear")) << "no forward matmul in the trace";
  EXPECT_TRUE(names.count("dtlab::update: optimizer.step")) << "the optimiser's scope is missing";
  const std::string table = dtlab::io::read_file(dir / "profile.txt");
  EXPECT_NE(table.find("a linear layer, steps 2-3"), std::string::npos) << table;
  const auto update = table.find("\nupdate: ");
  ASSERT_NE(update, std::string::npos) << table;
  // AdamW's arithmetic (its one-pass loop, a row of its own: Note [AdamW in one pass]) is in the
  // update phase, and backward has the matmuls' gradients.
  EXPECT_NE(table.find("dtlab::adamw_update", update), std::string::npos) << table;
  const auto backward = table.find("\nbackward: ");
  ASSERT_NE(backward, std::string::npos);
  EXPECT_NE(table.substr(backward, update - backward).find("aten::mm"), std::string::npos) << table;
}

TEST(ProfileTest, NothingIsRecordedOrWrittenWithoutAWindow) {
  const auto dir = dtlab::test::fresh_temp_dir("profile_off");
  const ProfiledRun run = run_steps(dir, "off", 2, 0, 3);
  EXPECT_TRUE(run.closed_at.empty());
  EXPECT_EQ(run.close_line, "");
  EXPECT_FALSE(std::filesystem::exists(dir / "trace.json"));
}

TEST(ProfileTest, ARunShorterThanTheWindowWritesWhatItHasAndSaysSo) {
  const auto dir = dtlab::test::fresh_temp_dir("profile_short");
  const ProfiledRun run = run_steps(dir, "short", 2, 3, 2);
  EXPECT_TRUE(run.closed_at.empty());
  EXPECT_NE(run.close_line.find("ended after 1 of the 3 profiled steps"), std::string::npos) << run.close_line;
  EXPECT_NE(dtlab::io::read_file(dir / "profile.txt").find("short, step 2"), std::string::npos);
}

TEST(ProfileTest, ARunThatEndsBeforeTheWindowSaysNothingWasWritten) {
  const auto dir = dtlab::test::fresh_temp_dir("profile_never");
  const ProfiledRun run = run_steps(dir, "never", 2, 3, 1);
  EXPECT_NE(run.close_line.find("ended before step 2"), std::string::npos) << run.close_line;
  EXPECT_NE(run.close_line.find("--max_steps 4"), std::string::npos) << run.close_line;
  EXPECT_FALSE(std::filesystem::exists(dir / "trace.json"));
}

TEST(ProfileTest, RecordsThePipelineStagesOnTheirOwnThreads) {
  using dtlab::pipeline::Pass;
  torch::nn::Linear a(16, 16), b(16, 16);
  dtlab::pipeline::StageWorkers workers({{[&](const torch::Tensor& x) { return a->forward(x); }, torch::kCPU},
                                         {[&](const torch::Tensor& x) { return b->forward(x); }, torch::kCPU}});
  const auto dir = dtlab::test::fresh_temp_dir("profile_pipeline");
  {
    dtlab::report::StepProfiler profiler(dir, "two stages", 1, 1);
    profiler.before_step(1);
    workers.submit({0, 0}, Pass::kForward, torch::randn({4, 16}));
    const torch::Tensor h = workers.collect(0);
    workers.submit({0, 1}, Pass::kForward, h);
    workers.collect(1);
    ASSERT_TRUE(profiler.after_step(1));
  }
  const nlohmann::json trace = dtlab::io::read_json_file(dir / "trace.json");
  std::set<int> threads_with_addmm;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("name") == "aten::addmm") threads_with_addmm.insert(e.at("tid").get<int>());
  }
  EXPECT_EQ(threads_with_addmm.size(), 2u) << "each stage's matmul on its own worker's row";
}
