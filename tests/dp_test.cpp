// The dp exercise end to end, at a world size the grader never uses (3 ranks): the reference
// solution's ranks read disjoint parts and together equal one process (dtlab-gpt2 with
// --train_order) on the union of their minibatches, loss by loss and gradient by gradient, with
// tokens counted over all ranks. The grader's own checks are in grader_test and
// grader_mutants_test; this suite pins the kit's parts they rely on.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "dtlab/io/json_file.h"
#include "dtlab/io/safetensors.h"
#include "dtlab/tooling/process.h"
#include "lm_fixture_util.h"
#include "process_test_util.h"
#include "test_util.h"

namespace dp_test {

namespace fs = std::filesystem;
using dtlab::ProcessResult;
using dtlab::run_process;
using dtlab::test::ChildExit;

constexpr int64_t kTrain = 400;
constexpr int kWorld = 3, kGlobalBatch = 12, kSteps = 6;

const fs::path& fixture() {
  static const fs::path dir = [] {
    const fs::path d = dtlab::test::fresh_temp_dir("dp-fixture");
    dtlab::test::write_small_lm_fixture(d, kTrain, 30, 10);
    return d;
  }();
  return dir;
}

// Dropout off and clipping on (the fixture's gradient norms are above 0.5), so single-process
// and data-parallel training must take the same steps.
std::vector<std::string> common_flags(const std::string& binary, const fs::path& out) {
  return {binary, "--model_name_or_path", (fixture() / "gpt2").string(), "--data_dir",
          (fixture() / "translation").string(), "--dropout", "0", "--learning_rate", "1e-3", "--max_grad_norm",
          "0.5", "--max_steps", std::to_string(kSteps), "--no_eval", "--threads", "1",
          "--seed", "42", "--no_save", "--overwrite_output_dir", "--output_dir", out.string()};
}

std::vector<ChildExit> run_dp(const std::string& binary, const fs::path& dir, int world, int global_batch) {
  const std::string port = std::to_string(dtlab::test::free_port());
  const auto argv_of = [&](int rank) {
    std::vector<std::string> args = common_flags(binary, dir / "out");
    args.insert(args.end(), {"--global_batch_size", std::to_string(global_batch), "--dump_dir", (dir / "dump").string(),
                             "--master_ip", "127.0.0.1", "--master_port", port, "--world_size",
                             std::to_string(world), "--local_rank", std::to_string(rank), "--timeout", "20"});
    return args;
  };
  return dtlab::test::run_ranks(world, argv_of, dir / "logs", 180);
}

std::vector<int64_t> as_vector(const torch::Tensor& t) {
  return {t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel()};
}

double relative_gradient_difference(const dtlab::io::TensorMap& a, const dtlab::io::TensorMap& b) {
  double diff = 0, scale = 0;
  for (const auto& [name, t] : b) {
    if (name.rfind("grad.", 0) != 0) continue;
    EXPECT_TRUE(a.count(name)) << name;
    if (!a.count(name)) continue;
    diff = std::max(diff, (a.at(name) - t).abs().max().item<double>());
    scale = std::max(scale, t.abs().max().item<double>());
  }
  return scale > 0 ? diff / scale : diff;
}

TEST(Dp, ThreeRanksEqualOneProcessOnTheUnionOfTheirMinibatches) {
  const fs::path dir = dtlab::test::fresh_temp_dir("dp-three");
  const std::vector<ChildExit> exits = run_dp(DTLAB_PROGRAM("dp-solution"), dir, kWorld, kGlobalBatch);
  for (const ChildExit& e : exits) ASSERT_EQ(e.exit_code, 0) << dtlab::test::describe_ranks(exits);

  // Disjoint parts of int(400 / 3) = 133 examples, 4 per step.
  std::vector<dtlab::io::TensorMap> dumps;
  std::vector<std::vector<int64_t>> parts;
  std::set<int64_t> seen;
  for (int r = 0; r < kWorld; ++r) {
    dumps.push_back(dtlab::io::load_safetensors(dir / "dump" / ("rank" + std::to_string(r) + ".safetensors")));
    parts.push_back(as_vector(dumps.back().at("shard")));
    EXPECT_EQ(parts.back().size(), 133u);
    EXPECT_EQ(dumps.back().at("batch").numel(), kGlobalBatch / kWorld);
    seen.insert(parts.back().begin(), parts.back().end());
  }
  EXPECT_EQ(seen.size(), 3u * 133u) << "the parts overlap";

  // One process reads, step by step, the union of the ranks' minibatches.
  nlohmann::json order = nlohmann::json::array();
  for (size_t start = 0; start < parts[0].size(); start += kGlobalBatch / kWorld) {
    for (const auto& part : parts) {
      for (size_t i = start; i < std::min(part.size(), start + kGlobalBatch / kWorld); ++i) order.push_back(part[i]);
    }
  }
  dtlab::io::write_json_file(dir / "order.json", order);
  std::vector<std::string> args = common_flags(DTLAB_PROGRAM("dtlab-gpt2"), dir / "one");
  args.insert(args.end(), {"--batch_size", std::to_string(kGlobalBatch), "--train_order", (dir / "order.json").string(),
                           "--dump_dir", (dir / "one-dump").string()});
  const ProcessResult one = run_process(args, 120);
  ASSERT_EQ(one.exit_code, 0) << one.output;

  const nlohmann::json ranks = dtlab::io::read_json_file(dir / "out" / "results.json");
  const nlohmann::json single = dtlab::io::read_json_file(dir / "one" / "results.json");
  ASSERT_EQ(ranks.at("iterations").size(), size_t{kSteps});
  ASSERT_EQ(single.at("iterations").size(), size_t{kSteps});
  EXPECT_TRUE(ranks.at("epochs").at(0).at("eval_loss").is_null()) << "--no_eval";
  for (size_t i = 0; i < size_t{kSteps}; ++i) {
    SCOPED_TRACE("step " + std::to_string(i + 1));
    const auto& a = ranks.at("iterations")[i];
    const auto& b = single.at("iterations")[i];
    EXPECT_NEAR(a.at("loss").get<double>(), b.at("loss").get<double>(), 1e-5);
    // Tokens are summed over the ranks: the union's real tokens. Padding depends on the cut of
    // each minibatch: each rank pads only to its own longest row.
    EXPECT_EQ(a.at("examples"), b.at("examples"));
    EXPECT_EQ(a.at("tokens"), b.at("tokens"));
    EXPECT_GE(a.at("padded_tokens").get<int64_t>(), a.at("tokens").get<int64_t>());
    EXPECT_LE(a.at("padded_tokens").get<int64_t>(), b.at("padded_tokens").get<int64_t>());
  }
  const dtlab::io::TensorMap full = dtlab::io::load_safetensors(dir / "one-dump" / "rank0.safetensors");
  EXPECT_EQ(as_vector(full.at("batch")).size(), size_t{kGlobalBatch});
  for (int r = 0; r < kWorld; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_LT(relative_gradient_difference(dumps[r], full), 1e-4);
  }
}

// A rank with more steps than the others would wait at its last all_reduce until the timeout;
// the kit compares the parts before the first step and stops every rank at once.
TEST(Dp, UnevenPartsStopEveryRankAtOnceNamingEachRanksSteps) {
  const fs::path dir = dtlab::test::fresh_temp_dir("dp-uneven");
  ::setenv("DTLAB_MUTANT", "uneven_parts", 1);
  const std::vector<ChildExit> exits = run_dp(DTLAB_PROGRAM("dp-mutants"), dir, 2, 8);
  ::unsetenv("DTLAB_MUTANT");
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_NE(exits[r].exit_code, 0) << exits[r].describe();
    EXPECT_FALSE(exits[r].timed_out);
    EXPECT_LT(exits[r].seconds, 20.0) << "within the collective timeout: no rank waited";
    EXPECT_NE(exits[r].output.find("different numbers of steps per epoch"), std::string::npos) << exits[r].output;
    EXPECT_NE(exits[r].output.find("rank 0: 204 examples, 4 per step: 51 steps"), std::string::npos) << exits[r].output;
    EXPECT_NE(exits[r].output.find("rank 1: 200 examples, 4 per step: 50 steps"), std::string::npos) << exits[r].output;
  }
}

TEST(Dp, ATrainOrderOutsideTheDataSetNamesTheFileAndTheEntry) {
  const fs::path dir = dtlab::test::fresh_temp_dir("dp-order");
  dtlab::io::write_json_file(dir / "order.json", nlohmann::json::array({0, 5, kTrain}));
  std::vector<std::string> args = common_flags(DTLAB_PROGRAM("dtlab-gpt2"), dir / "out");
  args.insert(args.end(), {"--train_order", (dir / "order.json").string()});
  const ProcessResult r = run_process(args, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find((dir / "order.json").string() + ": entry 2 is 400, not an index of the 400 training examples"),
            std::string::npos) << r.output;
}

}  // namespace dp_test
