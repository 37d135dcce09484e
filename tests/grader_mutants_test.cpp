// Deliberately broken task 2b solutions (tests/mutants), graded: each must fail the check that
// should catch it, with the words that tell a student what is wrong, within its timeout. A
// check that stops catching its bug fails here.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <ostream>

#include "dtlab/tooling/process.h"
#include "dtlab/io/json_file.h"
#include "test_util.h"

namespace {

struct Mutant {
  std::string name;     // DTLAB_MUTANT
  std::string check;    // the check that must fail (run alone with --only)
  std::string outcome;  // how it fails
  std::string words;    // what its message must say
  double max_seconds;   // the grading must end within this
};

// The collective timeout of these runs: a rank that waits for a hung one gives up after it.
constexpr int kTimeout = 5;

const std::vector<Mutant> kMutants = {
    {"sum_not_average", "gradients", "wrong number", "not divided by the world size", 120},
    {"no_broadcast", "broadcast", "wrong number", "every rank must start from rank 0's weights", 120},
    {"clip_before_sync", "gradients", "wrong number", "differs from the full-batch gradient", 120},
    {"overlapping_shards", "sampler", "wrong number", "read by more than one rank", 120},
    {"missing_shards", "sampler", "wrong number", "read by no rank", 120},
    {"sleep_forever", "losses-2", "hang", "rank 1 hung", 3 * kTimeout + 60},
    {"crash", "losses-2", "crash", "rank 1 crashed: killed by signal 11", 120},
};

void PrintTo(const Mutant& m, std::ostream* os) { *os << m.name << " caught by " << m.check; }

class GraderMutants : public ::testing::TestWithParam<Mutant> {};

TEST_P(GraderMutants, FailTheCheckThatShouldCatchThem) {
  const Mutant& m = GetParam();
  const auto dir = dtlab::test::fresh_temp_dir("mutant-" + m.name + "-" + m.check);
  ::setenv("DTLAB_MUTANT", m.name.c_str(), 1);  // the grader's ranks inherit it
  const auto start = std::chrono::steady_clock::now();
  const dtlab::ProcessResult r = dtlab::run_process(
      {DTLAB_GRADER_BIN, "check", "task2b", "--only", m.check, "--use-binary",
       std::string("task2b=") + DTLAB_TASK2B_MUTANTS_BIN, "--results", dir.string(), "--timeout",
       std::to_string(kTimeout), "--threads", "1"},
      m.max_seconds + 60);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::unsetenv("DTLAB_MUTANT");
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_LT(seconds, m.max_seconds) << r.output;
  const nlohmann::json results = dtlab::io::read_json_file(dir / "results.json");
  ASSERT_EQ(results.at("tests").size(), 1u) << results.dump(2);
  const auto& t = results.at("tests").at(0);
  EXPECT_EQ(t.at("extra_data").at("check"), "task2b/" + m.check);
  EXPECT_EQ(t.at("score").get<double>(), 0.0);
  EXPECT_EQ(t.at("extra_data").at("outcome"), m.outcome) << t.dump(2);
  EXPECT_NE(t.at("output").get<std::string>().find(m.words), std::string::npos) << t.dump(2);
}

// The same binary without a mutant passes the same checks: the failures above are the bugs'.
TEST(GraderMutants, WithoutAMutantTheSameBinaryPasses) {
  const auto dir = dtlab::test::fresh_temp_dir("mutant-none");
  const dtlab::ProcessResult r = dtlab::run_process(
      {DTLAB_GRADER_BIN, "check", "task2b", "--only", "broadcast", "--use-binary",
       std::string("task2b=") + DTLAB_TASK2B_MUTANTS_BIN, "--results", dir.string(), "--threads", "1"},
      300);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Task2b, GraderMutants, ::testing::ValuesIn(kMutants),
                         [](const ::testing::TestParamInfo<Mutant>& p) {
                           std::string id = p.param.name + "_" + p.param.check;
                           for (char& c : id) if (c == '-') c = '_';
                           return id;
                         });

}  // namespace
