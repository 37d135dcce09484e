// The tp exercise end to end, as processes, on configurations the grader does not use: a GPT-2 of
// two blocks, width 32 and 2 heads, at TP 2 and TP 2 x DP 2 on a global batch of 14 rows. The
// reference solution must equal one process loss by loss, with dropout on (Note [Dropout of a
// split model] in tp/gpt2_tp.h), save the folder one process saves, and refuse a --tp the world or
// the heads do not divide; the skeleton stops at its first TODO.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "dtlab/io/safetensors.h"
#include "lm_fixture_util.h"
#include "lm_ranks_util.h"
#include "process_test_util.h"
#include "test_util.h"

namespace tp_run_test {

namespace fs = std::filesystem;
using dtlab::test::ChildExit;

constexpr int kSteps = 6;
constexpr double kTolerance = 1e-5;

const fs::path& fixture() {
  static const fs::path dir = [] {
    const fs::path d = dtlab::test::fresh_temp_dir("tp-fixture");
    dtlab::tooling::Gpt2FixtureOptions gpt2 = dtlab::test::small_gpt2();
    gpt2.n_layer = 2;
    dtlab::test::write_small_lm_fixture(d, 200, 20, 5, gpt2);
    return d;
  }();
  return dir;
}

using TpRun = dtlab::test::LmRanksRun;
using dtlab::test::iteration_losses;

TpRun run(const std::string& binary, const std::string& name, int world, const std::string& dropout,
          const std::vector<std::string>& flags) {
  return dtlab::test::run_lm_ranks(binary, fixture(), "tp-" + name, world, flags, {kSteps, dropout, 20});
}

// One process: pp's driver with one stage reads the data as the TP grid's replicas do.
TpRun one_process(const std::string& dropout, int batch) {
  return run(DTLAB_PROGRAM("pp-solution"), "one-" + dropout + "-" + std::to_string(batch), 1, dropout,
             {"--stages", "1", "--micro_batches", "1", "--batch_size", std::to_string(batch)});
}

double largest_difference(const TpRun& a, const TpRun& b) {
  const std::vector<double> x = iteration_losses(a.results), y = iteration_losses(b.results);
  EXPECT_EQ(x.size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(y.size(), static_cast<size_t>(kSteps));
  double worst = 0;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return worst;
}

// Note [Dropout of a split model]: each rank draws the whole attention mask and keeps its heads'
// part, and the masks outside the split alike, so TP with dropout IS one process with dropout.
// The control: the same runs without dropout differ from these, so dropout was on.
TEST(TensorParallel, WithDropoutEqualsOneProcessExactly) {
  const TpRun one = one_process("0.1", 8);
  ASSERT_TRUE(one.ok()) << dtlab::test::describe_ranks(one.exits);
  const TpRun tp = run(DTLAB_PROGRAM("tp-solution"), "dropout", 2, "0.1", {"--tp", "2", "--global_batch_size", "8"});
  ASSERT_TRUE(tp.ok()) << dtlab::test::describe_ranks(tp.exits);
  EXPECT_LE(largest_difference(tp, one), kTolerance);
  const TpRun off = one_process("0", 8);
  ASSERT_TRUE(off.ok()) << dtlab::test::describe_ranks(off.exits);
  EXPECT_GT(largest_difference(off, one), 1e-3) << "dropout 0.1 changed nothing: the comparison proves nothing";
}

TEST(TensorParallel, TensorTimesDataEqualsOneProcessAndSavesItsFolder) {
  const TpRun one = run(DTLAB_PROGRAM("pp-solution"), "one-saved", 1, "0",
                        {"--stages", "1", "--micro_batches", "1", "--batch_size", "14"});
  ASSERT_TRUE(one.ok()) << dtlab::test::describe_ranks(one.exits);
  const TpRun grid = run(DTLAB_PROGRAM("tp-solution"), "grid", 4, "0", {"--tp", "2", "--global_batch_size", "14"});
  ASSERT_TRUE(grid.ok()) << dtlab::test::describe_ranks(grid.exits);
  EXPECT_LE(largest_difference(grid, one), kTolerance);
  const nlohmann::json& t = grid.results.at("tensor_parallel");
  EXPECT_EQ(t.at("tp"), 2);
  EXPECT_EQ(t.at("dp"), 2);
  EXPECT_NE(grid.exits[0].output.find("batch 7 x 2 replicas = 14,"), std::string::npos) << grid.exits[0].output;
  EXPECT_NE(grid.exits[0].output.find("grid        TP 2 x DP 2"), std::string::npos) << grid.exits[0].output;
  // The device mesh's groups, tensor fastest (Note [The mesh's order]).
  EXPECT_NE(grid.exits[0].output.find("mesh        data 2 x tensor 2: data {0, 2} {1, 3}; tensor {0, 1} {2, 3}"),
            std::string::npos) << grid.exits[0].output;
  // Rank 0 saved the whole model, gathered from the shards: one process's folder.
  const dtlab::io::TensorMap want = dtlab::io::load_safetensors(one.out / "model.safetensors");
  const dtlab::io::TensorMap got = dtlab::io::load_safetensors(grid.out / "model.safetensors");
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_LT((got.at(name) - w).abs().max().item<double>(), 1e-4) << name;
  }
  const dtlab::io::TensorMap start = dtlab::io::load_safetensors(fixture() / "gpt2" / "model.safetensors");
  double moved = 0;
  for (const auto& [name, w] : start) {
    if (got.count(name)) moved = std::max(moved, (got.at(name) - w).abs().max().item<double>());
  }
  EXPECT_GT(moved, 1e-3) << "training moved nothing: the comparison proves nothing";
}

TEST(TensorParallel, ATpTheWorldOrTheHeadsDoNotDivideIsAnErrorNamingTheFlag) {
  const TpRun world = run(DTLAB_PROGRAM("tp-solution"), "bad-world", 3, "0", {"--tp", "2"});
  for (const ChildExit& e : world.exits) {
    EXPECT_EQ(e.exit_code, 2) << e.describe();
    EXPECT_NE(e.output.find("--tp 2 does not divide the world size 3"), std::string::npos) << e.output;
  }
  const TpRun heads = run(DTLAB_PROGRAM("tp-solution"), "bad-heads", 3, "0", {"--tp", "3"});
  for (const ChildExit& e : heads.exits) {
    EXPECT_EQ(e.exit_code, 2) << e.describe();
    EXPECT_NE(e.output.find("--tp 3 does not divide GPT-2's 2 attention heads"), std::string::npos) << e.output;
  }
}

TEST(TensorParallel, TheSkeletonStopsAtItsFirstTodo) {
  const TpRun r = run(DTLAB_PROGRAM("tp"), "skeleton", 2, "0", {"--tp", "2"});
  for (const ChildExit& e : r.exits) {
    EXPECT_EQ(e.exit_code, 3) << e.describe();
    EXPECT_NE(e.output.find("TODO(tp)"), std::string::npos) << e.output;
  }
}

}  // namespace tp_run_test
