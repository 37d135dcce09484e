// Note [A reference run made once] (grader/reference_cache.h): what makes two reference runs the
// same run, and a stored run read back whole or not at all.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "dtlab/io/file.h"
#include "reference_cache.h"
#include "test_util.h"

// One namespace for the whole file: unit suites are compiled in groups (Note [Unity builds]).
namespace reference_cache_test {

namespace fs = std::filesystem;
using dtlab::grader::reference_key;
using dtlab::io::read_file;
using dtlab::io::write_file_atomically;

struct Inputs {
  fs::path dir = dtlab::test::fresh_temp_dir("reference-key");
  fs::path binary = dir / "dtlab-reference";
  fs::path fixture = dir / "fixture";
  Inputs() {
    write_file_atomically(binary, "the reference binary");
    write_file_atomically(fixture / "config.json", "{\"n_layer\": 2}");
    write_file_atomically(fixture / "model.safetensors", "weights");
  }
  std::string key(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) const {
    return reference_key("reference-w1", binary, args, env);
  }
};

TEST(ReferenceKey, AFileArgumentCountsByItsContentsNotItsPath) {
  const Inputs in;
  // Each grading writes its training order into its own folder: the same order is the same run.
  write_file_atomically(in.dir / "a" / "order", "3 1 2");
  write_file_atomically(in.dir / "b" / "order", "3 1 2");
  write_file_atomically(in.dir / "c" / "order", "1 2 3");
  const std::string a = in.key({"--train_order", (in.dir / "a" / "order").string()});
  EXPECT_EQ(a.rfind("reference-w1-", 0), 0u) << a;
  EXPECT_EQ(a, in.key({"--train_order", (in.dir / "b" / "order").string()}));
  EXPECT_NE(a, in.key({"--train_order", (in.dir / "c" / "order").string()}));
}

TEST(ReferenceKey, TheBinaryTheFixtureTheFlagsAndTheThreadsMakeTheKey) {
  const Inputs in;
  const std::vector<std::string> args = {"--model_name_or_path", in.fixture.string(), "--max_steps", "20"};
  const std::string before = in.key(args, {"OMP_NUM_THREADS=1"});
  EXPECT_EQ(before, in.key(args, {"OMP_NUM_THREADS=1"}));
  EXPECT_NE(before, in.key({"--model_name_or_path", in.fixture.string(), "--max_steps", "1"}, {"OMP_NUM_THREADS=1"}));
  EXPECT_NE(before, in.key(args, {"OMP_NUM_THREADS=2"}));
  // A mutant's variable is read by the mutant binaries only: every mutant case shares the reference.
  EXPECT_EQ(before, in.key(args, {"OMP_NUM_THREADS=1", "DTLAB_MUTANT=sum_not_average"}));
  write_file_atomically(in.fixture / "model.safetensors", "other weights");
  const std::string refixtured = in.key(args, {"OMP_NUM_THREADS=1"});
  EXPECT_NE(before, refixtured);
  write_file_atomically(in.binary, "the reference binary, rebuilt");
  EXPECT_NE(refixtured, in.key(args, {"OMP_NUM_THREADS=1"}));
}

TEST(ReferenceCache, AStoredRunComesBackWholeWithoutItsRunJson) {
  const fs::path dir = dtlab::test::fresh_temp_dir("reference-cache");
  const fs::path cache = dir / "cache", made = dir / "made", read = dir / "read";
  write_file_atomically(made / "rank0.log", "step 1 loss 0.69\n");
  write_file_atomically(made / "output" / "results.json", "{\"losses\": [0.69]}");
  write_file_atomically(made / "dump" / "step1.safetensors", "tensors");
  write_file_atomically(made / "run.json", "{\"id\": \"made\"}");
  EXPECT_FALSE(dtlab::grader::restore_reference(cache, "reference-w1-00", read)) << "nothing stored yet";
  dtlab::grader::store_reference(cache, "reference-w1-00", made);
  fs::create_directories(read);
  ASSERT_TRUE(dtlab::grader::restore_reference(cache, "reference-w1-00", read));
  EXPECT_EQ(read_file(read / "rank0.log"), "step 1 loss 0.69\n");
  EXPECT_EQ(read_file(read / "output" / "results.json"), "{\"losses\": [0.69]}");
  EXPECT_EQ(read_file(read / "dump" / "step1.safetensors"), "tensors");
  EXPECT_FALSE(fs::exists(read / "run.json")) << "each grading writes its own";
  // Stored once: a second store of the same key leaves the first.
  write_file_atomically(made / "rank0.log", "another run\n");
  dtlab::grader::store_reference(cache, "reference-w1-00", made);
  EXPECT_EQ(read_file(cache / "reference-w1-00" / "rank0.log"), "step 1 loss 0.69\n");
  // Nothing but whole stored runs is read: no staging folder is left, and none is a key.
  for (const auto& entry : fs::directory_iterator(cache)) {
    EXPECT_NE(entry.path().filename().string()[0], '.') << entry.path();
  }
}

TEST(ReferenceCache, KeepsTheMostRecentlyUsedRuns) {
  const fs::path dir = dtlab::test::fresh_temp_dir("reference-cache-bound");
  const fs::path cache = dir / "cache", made = dir / "made";
  write_file_atomically(made / "rank0.log", "log\n");
  const size_t n = dtlab::grader::kMaxStoredRuns;
  for (size_t i = 0; i <= n; ++i) {
    dtlab::grader::store_reference(cache, "run-" + std::to_string(i), made);
    // Folder times may tie within a tick: make the order of use explicit.
    fs::last_write_time(cache / ("run-" + std::to_string(i)),
                        fs::file_time_type::clock::now() - std::chrono::seconds(10 * static_cast<int>(n - i)));
  }
  dtlab::grader::store_reference(cache, "run-new", made);
  EXPECT_TRUE(fs::exists(cache / "run-new"));
  EXPECT_FALSE(fs::exists(cache / "run-0")) << "the least recently used go";
  EXPECT_FALSE(fs::exists(cache / "run-1"));
  EXPECT_TRUE(fs::exists(cache / "run-2"));
  size_t stored = 0;
  for (const auto& entry : fs::directory_iterator(cache)) stored += entry.is_directory();
  EXPECT_EQ(stored, n);
}

}  // namespace reference_cache_test
