// Task 4: the ring all_reduce traffic model, and the measurement on the loopback interface.
#include <gtest/gtest.h>

#include <thread>

#include "dtlab/tooling/process.h"
#include "dtlab/io/json_file.h"
#include "dtlab/tasks/task4.h"
#include "test_util.h"

namespace fs = std::filesystem;

TEST(RingAllreduce, EachRankSendsTwiceNMinusOneOverNOfTheTensor) {
  // 4 ranks: reduce-scatter and all-gather each send 3 quarters of the tensor.
  EXPECT_DOUBLE_EQ(dtlab::task4::ring_allreduce_bytes_per_rank(1000, 4), 1500.0);
  EXPECT_DOUBLE_EQ(dtlab::task4::ring_allreduce_bytes_per_rank(1000, 2), 1000.0);
  EXPECT_DOUBLE_EQ(dtlab::task4::ring_allreduce_bytes_per_rank(1000, 1), 0.0);
}

TEST(RingAllreduce, EpochTrafficIsIterationsTimesTheRingCostOfEachAllreduce) {
  std::vector<dtlab::dist::CommRecord> one(2);
  one[0].bytes = 400;
  one[1].bytes = 600;
  // (400 + 600) x 2 x 3/4 = 1500 bytes per iteration, 10 iterations.
  EXPECT_DOUBLE_EQ(dtlab::task4::expected_epoch_bytes_per_rank(one, 10, 4), 15000.0);
}

// Two ranks on loopback: the tx counter of lo must match the model within a few percent
// (headers and the rendezvous add a little; nothing else may use lo meanwhile: RUN_SERIAL).
TEST(Task4, MeasuredLoopbackTrafficMatchesTheRingModel) {
  const fs::path dir = dtlab::test::fresh_temp_dir("task4");
  ASSERT_EQ(dtlab::run_process({DTLAB_PROGRAM("dtlab-fixtures"), "--out", (dir / "fx").string()}, 60).exit_code, 0);
  const std::string port = std::to_string(dtlab::free_local_port());
  dtlab::ProcessResult results[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      results[r] = dtlab::run_process(
          {DTLAB_PROGRAM("task4-solution"), "--model_name_or_path", (dir / "fx/bert-tiny").string(),
           "--data_dir", (dir / "fx/RTE").string(), "--max_seq_length", "32", "--max_steps", "4",
           "--batch_sizes", "32,16", "--threads", "1", "--output_dir", (dir / "out").string(),
           "--master_ip", "127.0.0.1", "--master_port", port, "--world_size", "2",
           "--local_rank", std::to_string(r), "--timeout", "60"},
          600);
    });
  }
  for (auto& t : ranks) t.join();
  ASSERT_EQ(results[0].exit_code, 0) << results[0].output;
  ASSERT_EQ(results[1].exit_code, 0) << results[1].output;
  const nlohmann::json j = dtlab::io::read_json_file(dir / "out/results.json");
  ASSERT_EQ(j.at("traffic").size(), 2u);
  for (const auto& row : j.at("traffic")) {
    const double ratio = row.at("ratio_measured_to_expected").get<double>();
    EXPECT_GT(ratio, 0.99) << row.dump();
    EXPECT_LT(ratio, 1.05) << row.dump();
    EXPECT_EQ(row.at("iterations").get<int>(), 4);
  }
  // The traffic of an iteration does not depend on the batch: the same gradients are reduced.
  EXPECT_EQ(j.at("traffic")[0].at("expected_bytes_per_rank"), j.at("traffic")[1].at("expected_bytes_per_rank"));
}

TEST(Task4, SkeletonStopsAtItsFirstTodo) {
  const fs::path dir = dtlab::test::fresh_temp_dir("task4_skeleton");
  ASSERT_EQ(dtlab::run_process({DTLAB_PROGRAM("dtlab-fixtures"), "--out", (dir / "fx").string(), "--train_examples", "64",
                                "--dev_examples", "8"}, 60).exit_code, 0);
  const dtlab::ProcessResult r = dtlab::run_process(
      {DTLAB_PROGRAM("task4"), "--model_name_or_path", (dir / "fx/bert-tiny").string(), "--data_dir",
       (dir / "fx/RTE").string(), "--max_seq_length", "32", "--max_steps", "1", "--batch_sizes", "16",
       "--threads", "1", "--output_dir", (dir / "out").string()},
      300);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("TODO(task4): add up the ring cost"), std::string::npos) << r.output;
}

// The grader's task 4 checks on the reference solution at 4 ranks, a full epoch per batch size
// (here because the measured check reads loopback's counters, and this suite runs alone).
TEST(Task4, GraderGivesTheReferenceFullMarks) {
  const fs::path dir = dtlab::test::fresh_temp_dir("grade-task4");
  const dtlab::ProcessResult r = dtlab::run_process(
      {DTLAB_PROGRAM("grader"), "check", "task4", "--solutions", "--results", dir.string(), "--threads", "1"}, 600);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json results = dtlab::io::read_json_file(dir / "results.json");
  EXPECT_EQ(results.at("tests").size(), 2u);
  EXPECT_EQ(results.at("score"), results.at("max_score")) << r.output;
  const nlohmann::json traffic = dtlab::io::read_json_file(dir / "runs/task4-traffic-w4/output/results.json");
  ASSERT_EQ(traffic.at("traffic").size(), 3u);
  // Halving the batch doubles the iterations of an epoch, and so the bytes.
  const auto& rows = traffic.at("traffic");
  EXPECT_NEAR(rows[1].at("expected_bytes_per_rank").get<double>() / rows[0].at("expected_bytes_per_rank").get<double>(),
              2.0, 0.05);
}
