// Tasks 2a, 2b and 3 end to end: the data-parallel binaries run as a student runs them, one
// process per rank on this machine (loopback rendezvous), and compared with task 1's single
// process on the same global batches.
//
// Why the losses must agree: with dropout 0 and the same seed, a data-parallel step sees exactly
// the examples of task 1's step. The DistributedSampler draws the same permutation on every rank
// (seed + epoch, as RandomSampler does at world size 1) and gives rank r its positions r, r + W,
// r + 2W, ...; minibatch k of each rank takes the shard positions k*B/W .. (k+1)*B/W - 1, so
// together the ranks take permutation positions k*B .. (k+1)*B - 1: the same contiguous chunk
// task 1 takes with batch B. Every rank starts from the same weights (the pre-trained ones and
// a classifier drawn from the same seed), the averaged gradient equals the gradient of the mean
// loss over the global batch, and the optimiser steps are identical; only the order in which
// floats are summed differs (per rank, then across ranks). Measured differences are ~1e-7 over
// 10 steps; 1e-5 leaves room while still failing on any real mistake (a missing division by the
// world size, a wrong shard, an unsynchronised parameter all give >1e-3 within a few steps).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "dtlab/core/subprocess.h"
#include "dtlab/io/json_file.h"
#include "process_test_util.h"
#include "test_util.h"

namespace fs = std::filesystem;
using dtlab::ProcessResult;
using dtlab::run_process;
using dtlab::test::ChildExit;
using dtlab::test::describe_ranks;
using dtlab::test::iteration_losses;

namespace {

constexpr double kRunTimeoutSeconds = 600;  // per run of all ranks; generous, the machine is shared
constexpr double kTolerance = 1e-5;         // see the comment at the top
constexpr int kGlobalBatch = 32;
constexpr int kSteps = 8;
constexpr int64_t kTrainExamples = 2490;  // the fixture's RTE train.tsv

struct Exercise {
  std::string name;
  std::string solution;
  std::string skeleton;
};

const std::vector<Exercise>& exercises() {
  static const std::vector<Exercise> all = {
      {"task2a", DTLAB_TASK2A_SOLUTION_BIN, DTLAB_TASK2A_BIN},
      {"task2b", DTLAB_TASK2B_SOLUTION_BIN, DTLAB_TASK2B_BIN},
      {"task3", DTLAB_TASK3_SOLUTION_BIN, DTLAB_TASK3_BIN},
  };
  return all;
}

const Exercise& exercise(const std::string& name) {
  for (const auto& e : exercises()) {
    if (e.name == name) return e;
  }
  throw std::runtime_error("no exercise " + name);
}

class DataParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info->test_suite_name()) + "-" + info->name();
    for (char& c : name) {
      if (c == '/') c = '-';
    }
    dir_ = dtlab::test::fresh_temp_dir(name);
    const ProcessResult r = run_process({DTLAB_FIXTURES_BIN, "--out", (dir_ / "fx").string()}, 60);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }

  // The flags every run shares: dropout off, the same seed, a sequence length that fits every
  // fixture example, one thread per process (up to four ranks share this machine).
  std::vector<std::string> common_flags(const std::string& binary, const fs::path& out) const {
    return {binary, "--model_name_or_path", (dir_ / "fx/bert-tiny").string(), "--data_dir",
            (dir_ / "fx/RTE").string(), "--do_train", "--max_seq_length", "32", "--learning_rate",
            "3e-4", "--num_train_epochs", "1", "--max_steps", std::to_string(kSteps), "--dropout", "0",
            "--seed", "42", "--threads", "1", "--no_save", "--overwrite_output_dir", "--output_dir",
            out.string()};
  }

  // Task 1's losses with batch kGlobalBatch: the reference.
  std::vector<double> task1_losses() {
    const fs::path out = dir_ / "task1";
    std::vector<std::string> args = common_flags(DTLAB_TASK1_SOLUTION_BIN, out);
    args.insert(args.end(), {"--per_gpu_train_batch_size", std::to_string(kGlobalBatch)});
    const ProcessResult r = run_process(args, kRunTimeoutSeconds);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.exit_code == 0 ? iteration_losses(dtlab::io::read_json_file(out / "results.json"))
                            : std::vector<double>{};
  }

  // Runs `world` ranks of `binary` on loopback, each with `extra` flags, and returns rank 0's
  // results.json. Any rank failing is a test failure (with every rank's output).
  nlohmann::json run_world(const std::string& binary, int world, const std::string& label,
                           const std::vector<std::string>& extra = {}) {
    const fs::path out = dir_ / label;
    const std::string port = std::to_string(dtlab::test::free_port());
    const auto argv_of = [&](int rank) {
      std::vector<std::string> args = common_flags(binary, out);
      args.insert(args.end(), {"--global_batch_size", std::to_string(kGlobalBatch), "--master_ip",
                               "127.0.0.1", "--master_port", port, "--world_size",
                               std::to_string(world), "--local_rank", std::to_string(rank)});
      args.insert(args.end(), extra.begin(), extra.end());
      return args;
    };
    const std::vector<ChildExit> exits =
        dtlab::test::run_ranks(world, argv_of, dir_ / (label + "-logs"), kRunTimeoutSeconds);
    bool ok = true;
    for (const auto& e : exits) ok = ok && e.exit_code == 0;
    EXPECT_TRUE(ok) << binary << " at world size " << world << ":\n" << describe_ranks(exits);
    if (!ok) return nlohmann::json();
    return dtlab::io::read_json_file(out / "results.json");
  }

  fs::path dir_;
};

// Losses of `got` and `want` agree within `tolerance` on the first `steps` iterations.
::testing::AssertionResult losses_agree(const std::vector<double>& got, const std::vector<double>& want,
                                        size_t steps, double tolerance) {
  if (got.size() < steps || want.size() < steps) {
    return ::testing::AssertionFailure() << "expected at least " << steps << " iterations, got "
                                         << got.size() << " and " << want.size();
  }
  for (size_t i = 0; i < steps; ++i) {
    if (!(std::fabs(got[i] - want[i]) <= tolerance)) {
      return ::testing::AssertionFailure() << "step " << i + 1 << ": loss " << got[i] << " vs task 1's "
                                           << want[i] << " (difference " << std::fabs(got[i] - want[i])
                                           << " > " << tolerance << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

double max_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

// The steps whose global batch is full at every world size: a world size that does not divide
// the data set makes the DistributedSampler pad (repeat the permutation's start), which changes
// only the last, partial batch of the epoch, so comparisons stop before it.
size_t comparable_steps(int64_t examples, int global_batch, size_t steps) {
  return std::min<size_t>(steps, static_cast<size_t>(examples / global_batch));
}

class DataParallelEquivalence : public DataParallel,
                                public ::testing::WithParamInterface<std::string> {};

TEST_P(DataParallelEquivalence, LossesMatchTask1AtWorldSizes1_2_4) {
  const Exercise& ex = exercise(GetParam());
  const std::vector<double> want = task1_losses();
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps));
  // World size 4 does not divide the 2490 examples (the sampler pads each shard to 623), the
  // uneven case; world size 2 does.
  static_assert(kTrainExamples % 4 != 0 && kTrainExamples % 2 == 0);
  const size_t steps = comparable_steps(kTrainExamples, kGlobalBatch, kSteps);
  for (int world : {1, 2, 4}) {
    SCOPED_TRACE(ex.name + " at world size " + std::to_string(world));
    const nlohmann::json results = run_world(ex.solution, world, "w" + std::to_string(world));
    ASSERT_FALSE(results.is_null());
    EXPECT_EQ(results.at("environment").at("world_size").get<int>(), world);
    EXPECT_EQ(results.at("config").at("per_rank_train_batch_size").get<int>(), kGlobalBatch / world);
    const std::vector<double> got = iteration_losses(results);
    EXPECT_EQ(got.size(), static_cast<size_t>(kSteps));
    EXPECT_TRUE(losses_agree(got, want, steps, kTolerance));
    std::printf("%s world %d: max |loss - task1 loss| = %.3g over %zu steps\n", ex.name.c_str(), world,
                max_difference(got, want), steps);
  }
}

INSTANTIATE_TEST_SUITE_P(Exercises, DataParallelEquivalence, ::testing::Values("task2a", "task2b", "task3"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// DistributedDataParallel broadcasts rank 0's parameters when it wraps the model, so ranks that
// drew different initial weights still train rank 0's model, which is task 1's (rank 0's seed is
// the seed).
TEST_F(DataParallel, Task3BroadcastsInitialWeightsSoInitSeedPerRankStillMatches) {
  const std::vector<double> want = task1_losses();
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps));
  const nlohmann::json results = run_world(DTLAB_TASK3_SOLUTION_BIN, 2, "w2", {"--init_seed_per_rank"});
  ASSERT_FALSE(results.is_null());
  EXPECT_TRUE(results.at("config").at("init_seed_per_rank").get<bool>());
  EXPECT_TRUE(losses_agree(iteration_losses(results), want, kSteps, kTolerance));
}

// Task 2b only averages gradients: ranks that start from different weights stay different, so
// the mean loss is not task 1's. This pins down that the broadcast above is DDP's doing, and
// that --init_seed_per_rank really gives the ranks different weights.
TEST_F(DataParallel, Task2bDoesNotBroadcastSoInitSeedPerRankDiverges) {
  const std::vector<double> want = task1_losses();
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps));
  const nlohmann::json results = run_world(DTLAB_TASK2B_SOLUTION_BIN, 2, "w2", {"--init_seed_per_rank"});
  ASSERT_FALSE(results.is_null());
  const std::vector<double> got = iteration_losses(results);
  ASSERT_EQ(got.size(), static_cast<size_t>(kSteps));
  const double diff = max_difference(got, want);
  std::printf("task2b --init_seed_per_rank: max |loss - task1 loss| = %.3g\n", diff);
  EXPECT_GT(diff, 1e-4) << "rank 1's different initial classifier must show in the mean loss";
}

// Buckets change when gradients are reduced, not what is reduced: a bucket per parameter (a cap
// of about one byte) and as few buckets as possible (1000 MB) give the same losses, bit for bit
// (each gradient element is the same sum over the same two ranks either way).
TEST_F(DataParallel, Task3BucketCapDoesNotChangeTheLosses) {
  const nlohmann::json tiny = run_world(DTLAB_TASK3_SOLUTION_BIN, 2, "tiny", {"--bucket_cap_mb", "0.000001"});
  const nlohmann::json huge = run_world(DTLAB_TASK3_SOLUTION_BIN, 2, "huge", {"--bucket_cap_mb", "1000"});
  ASSERT_FALSE(tiny.is_null());
  ASSERT_FALSE(huge.is_null());
  const auto& tiny_buckets = tiny.at("communication").at("ddp_buckets");
  const auto& huge_buckets = huge.at("communication").at("ddp_buckets");
  // As in PyTorch, the first bucket (the last parameters) closes at 1 MiB whatever the cap, so
  // this 2.2 MB model is two buckets under a huge cap; under a tiny cap every later bucket is one
  // parameter tensor.
  EXPECT_EQ(huge_buckets.size(), 2u) << huge_buckets.dump();
  EXPECT_GT(tiny_buckets.size(), 10u) << tiny_buckets.dump();
  for (size_t b = 1; b < tiny_buckets.size(); ++b) {
    EXPECT_EQ(tiny_buckets[b].at("parameters").get<int>(), 1) << "bucket " << b;
  }
  const std::vector<double> a = iteration_losses(tiny), b = iteration_losses(huge);
  ASSERT_EQ(a.size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(a, b);
}

TEST_F(DataParallel, IndivisibleGlobalBatchSizeIsAUsageErrorNamingTheFlag) {
  const std::string port = std::to_string(dtlab::test::free_port());
  const auto argv_of = [&](int rank) {
    std::vector<std::string> args = common_flags(DTLAB_TASK2B_SOLUTION_BIN, dir_ / "out");
    args.insert(args.end(), {"--global_batch_size", "30", "--master_ip", "127.0.0.1", "--master_port",
                             port, "--world_size", "4", "--local_rank", std::to_string(rank)});
    return args;
  };
  const std::vector<ChildExit> exits = dtlab::test::run_ranks(4, argv_of, dir_ / "logs", 120);
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(exits[r].exit_code, 2) << exits[r].describe();  // kExitUsage
    EXPECT_NE(exits[r].output.find("--global_batch_size 30"), std::string::npos) << exits[r].output;
    EXPECT_NE(exits[r].output.find("world size 4"), std::string::npos) << exits[r].output;
  }
}

// A student's first run: the skeleton stops at its first TODO, the process group, with exit 3.
TEST_F(DataParallel, SkeletonsStopAtTheProcessGroupTodo) {
  for (const Exercise& ex : exercises()) {
    SCOPED_TRACE(ex.name);
    std::vector<std::string> args = common_flags(ex.skeleton, dir_ / ("out-" + ex.name));
    args.insert(args.end(), {"--global_batch_size", "32", "--world_size", "1", "--local_rank", "0"});
    const ProcessResult r = run_process(args, 120);
    EXPECT_EQ(r.exit_code, 3) << r.output;  // kExitNotImplemented
    EXPECT_NE(r.output.find("TODO not done: TODO(" + ex.name + "): set up the process group"), std::string::npos)
        << r.output;
  }
}

}  // namespace
