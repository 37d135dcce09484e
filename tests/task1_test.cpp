// Task 1 end to end: the binaries a student runs, run as a student runs them, on the fixtures.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "dtlab/tooling/process.h"
#include "dtlab/io/file.h"
#include "dtlab/io/json_file.h"
#include "dtlab/io/safetensors.h"
#include "test_util.h"

namespace fs = std::filesystem;
using dtlab::ProcessResult;
using dtlab::run_process;

namespace {

constexpr double kRunTimeoutSeconds = 600;  // generous: the machine may be shared

class Task1 : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = dtlab::test::fresh_temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    const ProcessResult r = run_process({DTLAB_PROGRAM("dtlab-fixtures"), "--out", (dir_ / "fx").string()}, 60);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }

  // The run_glue flags of the demo, at a sequence length that fits every fixture example
  // (at most 14 + 7 words, 2 full stops and 3 special tokens), so the test runs quickly.
  std::vector<std::string> flags(const std::string& binary, const fs::path& out) const {
    return {binary, "--model_type", "bert", "--model_name_or_path", (dir_ / "fx/bert-tiny").string(),
            "--task_name", "RTE", "--do_train", "--do_eval", "--data_dir", (dir_ / "fx/RTE").string(),
            "--max_seq_length", "32", "--per_gpu_train_batch_size", "32", "--learning_rate", "3e-4",
            "--num_train_epochs", "3", "--output_dir", out.string(), "--seed", "42",
            "--threads", "1"};
  }

  static std::vector<std::string> with(std::vector<std::string> args, std::vector<std::string> more) {
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }

  fs::path dir_;
};

std::vector<double> losses(const nlohmann::json& results) {
  std::vector<double> out;
  for (const auto& it : results.at("iterations")) out.push_back(it.at("loss").get<double>());
  return out;
}

}  // namespace

// Chance on the balanced dev set is 0.5 with a standard deviation of sqrt(0.25 / 277) = 0.03,
// so 0.80 is ten standard deviations above chance, and far below the 0.97 the reference reaches
// after 3 epochs on this machine (handouts/task1.md): a working solution cannot miss it, a model
// that does not learn cannot reach it.
constexpr double kMinDevAccuracy = 0.80;

TEST_F(Task1, SolutionLowersTheLossAndLearnsTheFixture) {
  const fs::path out = dir_ / "out";
  const ProcessResult r = run_process(flags(DTLAB_PROGRAM("task1-solution"), out), kRunTimeoutSeconds);
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // The first five minibatch losses are printed, then one line per epoch with its accuracy.
  for (int step = 1; step <= 5; ++step) {
    EXPECT_NE(r.output.find("step=" + std::to_string(step) + " epoch=1 loss="), std::string::npos) << r.output;
  }
  EXPECT_EQ(r.output.find("step=6 "), std::string::npos) << "only the first five steps are printed";
  for (int epoch = 1; epoch <= 3; ++epoch) {
    EXPECT_NE(r.output.find("epoch=" + std::to_string(epoch) + " train_loss="), std::string::npos);
  }

  const nlohmann::json results = dtlab::io::read_json_file(out / "results.json");
  const std::vector<double> loss = losses(results);
  ASSERT_EQ(loss.size(), 3u * 78u) << "3 epochs of ceil(2490 / 32) = 78 steps";
  // A fresh classifier on two balanced classes starts near ln 2 = 0.693.
  EXPECT_NEAR(loss.front(), 0.693, 0.1);
  const auto& epochs = results.at("epochs");
  ASSERT_EQ(epochs.size(), 3u);
  EXPECT_LT(epochs.back().at("train_loss").get<double>(), 0.5 * loss.front());
  const double accuracy = epochs.back().at("eval_accuracy").get<double>();
  EXPECT_GE(accuracy, kMinDevAccuracy);
  EXPECT_EQ(epochs.back().at("eval_examples").get<int>(), 277);
  EXPECT_EQ(results.at("timing").at("count").get<int>(), 39) << "40 iterations, the first discarded";

  // The saved model is a Hugging Face folder that evaluates to the same accuracy.
  const fs::path again = dir_ / "eval";
  std::vector<std::string> eval = {DTLAB_PROGRAM("task1-solution"), "--model_name_or_path", out.string(),
                                   "--data_dir", (dir_ / "fx/RTE").string(), "--do_eval",
                                   "--max_seq_length", "32", "--output_dir", again.string(),
                                   "--threads", "1"};
  const ProcessResult e = run_process(eval, kRunTimeoutSeconds);
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_EQ(e.output.find("newly initialized"), std::string::npos) << "the classifier was saved";
  const nlohmann::json evaluated = dtlab::io::read_json_file(again / "results.json");
  EXPECT_DOUBLE_EQ(evaluated.at("epochs").back().at("eval_accuracy").get<double>(), accuracy);
}

TEST_F(Task1, SameSeedGivesIdenticalLosses) {
  std::vector<double> runs[2];
  for (int i = 0; i < 2; ++i) {
    const fs::path out = dir_ / ("out" + std::to_string(i));
    const ProcessResult r = run_process(with(flags(DTLAB_PROGRAM("task1-solution"), out), {"--max_steps", "6", "--no_save"}),
                                        kRunTimeoutSeconds);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    runs[i] = losses(dtlab::io::read_json_file(out / "results.json"));
  }
  ASSERT_EQ(runs[0].size(), 6u);
  EXPECT_EQ(runs[0], runs[1]);
}

TEST_F(Task1, SkeletonStopsAtItsFirstTodoWithThatTodosMessage) {
  const ProcessResult r = run_process(flags(DTLAB_PROGRAM("task1"), dir_ / "out"), kRunTimeoutSeconds);
  EXPECT_EQ(r.exit_code, 3) << r.output;  // kExitNotImplemented
  EXPECT_NE(r.output.find("TODO not done: TODO(task1): load the pre-trained model"), std::string::npos)
      << r.output;
}

TEST_F(Task1, MissingModelFolderIsAOneLineErrorNamingTheFlag) {
  std::vector<std::string> args = flags(DTLAB_PROGRAM("task1-solution"), dir_ / "out");
  args[4] = (dir_ / "no-such-model").string();
  const ProcessResult r = run_process(args, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--model_name_or_path"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("dtlab-fixtures"), std::string::npos) << r.output;
}

// A checkpoint whose classifier was fine-tuned for 3 labels, run on RTE's 2: refused with the
// weight file, the tensor and both shapes, as transformers refuses it; --ignore_mismatched_sizes
// starts a fresh classifier and says so, as transformers' ignore_mismatched_sizes=True does.
TEST_F(Task1, ClassifierOfAnotherLabelCountIsRefusedUnlessIgnoreMismatchedSizes) {
  const fs::path weights = dir_ / "fx/bert-tiny/model.safetensors";
  const int64_t hidden =
      dtlab::io::read_json_file(dir_ / "fx/bert-tiny/config.json").at("hidden_size").get<int64_t>();
  auto tensors = dtlab::io::load_safetensors(weights);
  tensors["classifier.weight"] = torch::zeros({3, hidden});
  tensors["classifier.bias"] = torch::zeros({3});
  dtlab::io::save_safetensors(weights, tensors, {{"format", "pt"}});
  const std::string shapes = "[3, " + std::to_string(hidden) + "] in the checkpoint but the model expects [2, " +
                             std::to_string(hidden) + "]";

  const ProcessResult refused = run_process(flags(DTLAB_PROGRAM("task1-solution"), dir_ / "out"), 60);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find(weights.string() + ": classifier.weight has shape " + shapes), std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("--ignore_mismatched_sizes"), std::string::npos) << refused.output;

  const ProcessResult fresh = run_process(
      with(flags(DTLAB_PROGRAM("task1-solution"), dir_ / "out2"), {"--ignore_mismatched_sizes", "--max_steps", "2", "--no_save"}),
      kRunTimeoutSeconds);
  ASSERT_EQ(fresh.exit_code, 0) << fresh.output;
  EXPECT_NE(fresh.output.find("newly initialized because the shapes did not match:\n- classifier.weight: found shape [3, "),
            std::string::npos) << fresh.output;
}

TEST_F(Task1, NonEmptyOutputDirNeedsOverwriteFlag) {
  const fs::path out = dir_ / "out";
  dtlab::io::write_file_atomically(out / "keep.txt", "precious");
  const ProcessResult r = run_process(flags(DTLAB_PROGRAM("task1-solution"), out), 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--overwrite_output_dir"), std::string::npos) << r.output;
  EXPECT_EQ(dtlab::io::read_file(out / "keep.txt"), "precious");
}

TEST_F(Task1, MalformedTrainingFileNamesFileAndLine) {
  dtlab::io::write_file_atomically(dir_ / "fx/RTE/train.tsv",
                                   "index\tsentence1\tsentence2\tlabel\n0\ta b.\ta.\tentailment\n1\tonly two\n");
  const ProcessResult r = run_process(flags(DTLAB_PROGRAM("task1-solution"), dir_ / "out"), 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("train.tsv:3: expected 4 tab-separated fields"), std::string::npos) << r.output;
}

TEST_F(Task1, UnknownFlagIsAUsageError) {
  const ProcessResult r = run_process(with(flags(DTLAB_PROGRAM("task1-solution"), dir_ / "out"), {"--lerning_rate", "1"}), 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("lerning_rate"), std::string::npos) << r.output;
}
