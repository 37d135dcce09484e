// The grader end to end, as an instructor and a student run it: full marks on the reference
// solutions, zero on the untouched skeletons with each check naming its TODO, provenance on the
// grade, the student release, and a submission folder built and graded.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "dtlab/core/cuda_half.h"
#include "dtlab/core/device.h"
#include "dtlab/tooling/process.h"
#include "dtlab/io/file.h"
#include "dtlab/io/json_file.h"
#include "dtlab/tooling/fork_server.h"
#include "process_test_util.h"
#include "test_util.h"

namespace fs = std::filesystem;
using dtlab::ProcessResult;
using dtlab::run_process;

namespace {

// Timing runs are short here (the demo times 40 iterations) and every rank has one thread, as
// other suites run beside this one; everything else is as graded.
const std::vector<std::string> kQuick = {"--timing-iterations", "4", "--timeout", "20", "--threads", "1"};

ProcessResult grade(std::vector<std::string> args, double timeout = 600) {
  args.insert(args.begin(), DTLAB_PROGRAM("grader"));
  return run_process(args, timeout);
}

nlohmann::json test_named(const nlohmann::json& results, const std::string& check) {
  for (const auto& t : results.at("tests")) {
    if (t.at("extra_data").at("check") == check) return t;
  }
  return nullptr;
}

// The --max_steps a run's ranks were given (its run.json's command), "" when none.
std::string max_steps_of(const fs::path& run) {
  const nlohmann::json command = dtlab::io::read_json_file(run / "run.json").at("command");
  for (size_t i = 0; i + 1 < command.size(); ++i) {
    if (command[i] == "--max_steps") return command[i + 1].get<std::string>();
  }
  return "";
}

}  // namespace

TEST(Grader, ListsEveryExerciseAndItsChecks) {
  const ProcessResult r = grade({"list"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* needle : {"task1", "task2a", "task2b", "task3", "task4", "gradients", "sampler", "broadcast",
                             "losses-4", "buckets", "measured", "points"}) {
    EXPECT_NE(r.output.find(needle), std::string::npos) << needle << " missing from:\n" << r.output;
  }
}

// exercises.txt is the one table: `grader list` shows its rows, in its order, with its titles.
TEST(Grader, ListFollowsTheExerciseTable) {
  std::ifstream table(std::string(DTLAB_SOURCE_DIR) + "/exercises.txt");
  ASSERT_TRUE(table) << "exercises.txt missing";
  std::vector<std::string> rows;
  for (std::string line; std::getline(table, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name, launch, kind, title;
    fields >> name >> launch >> kind;
    std::getline(fields >> std::ws, title);
    // uses=A,B (the rows whose tasks/ folders this one compiles too) is said after the title.
    std::string uses;
    if (title.rfind("uses=", 0) == 0) {
      uses = title.substr(5, title.find(' ') - 5);
      title = title.substr(title.find(' ') + 1);
      for (size_t c = uses.find(','); c != std::string::npos; c = uses.find(',', c + 8)) uses.replace(c, 1, ", tasks/");
      title += " (compiles your tasks/" + uses + " too)";
    }
    rows.push_back(name + "  " + title);
  }
  ASSERT_GE(rows.size(), 5u);
  const ProcessResult r = grade({"list"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  size_t at = 0;
  for (const auto& row : rows) {
    const size_t found = r.output.find(row + "\n", at);
    ASSERT_NE(found, std::string::npos) << "'" << row << "' missing or out of order in:\n" << r.output;
    at = found + row.size();
  }
}

TEST(Grader, AnUnknownExerciseIsAUsageErrorNamingTheChoices) {
  const ProcessResult r = grade({"check", "task9"}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no exercise 'task9'"), std::string::npos) << r.output;
}

TEST(Grader, ATimeoutOfNoSecondsIsAUsageErrorInWords) {
  for (const char* flag : {"--timeout", "--run-timeout"}) {
    const ProcessResult r = grade({"check", "task2b", flag, "0"}, 60);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(std::string(flag) + ": must be a number of seconds above 0, not 0"), std::string::npos)
        << r.output;
  }
}

// `grader check --backend nccl` where no GPU can run it (no CUDA in this build, or none visible)
// says so in one line before any run, instead of failing every check after a timeout.
TEST(Grader, NcclWithoutAGpuIsAUsageErrorBeforeAnyRun) {
  if (dtlab::why_no_cuda(dtlab::cuda_availability()).empty()) GTEST_SKIP() << "this machine has a GPU";
  const std::filesystem::path results = dtlab::test::fresh_temp_dir("grader-nccl");
  const auto start = std::chrono::steady_clock::now();
  const ProcessResult r = grade({"check", "task2b", "--solutions", "--backend", "nccl", "--results", results.string()}, 60);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10) << r.output;
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--backend nccl needs a CUDA GPU"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--backend gloo"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(results / "runs")) << "no rank was started";
}

// Task 4's measurement reads the machine-wide loopback counters, so it is graded in task4_test,
// which runs alone.
TEST(Grader, ReferenceSolutionsScoreFullMarksWithProvenance) {
  const fs::path dir = dtlab::test::fresh_temp_dir("grade-solutions");
  std::vector<std::string> args = {"check", "task1,task2a,task2b,task3", "--solutions", "--results", dir.string()};
  args.insert(args.end(), kQuick.begin(), kQuick.end());
  const ProcessResult r = grade(args, 900);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json results = dtlab::io::read_json_file(dir / "results.json");
  EXPECT_GT(results.at("max_score").get<double>(), 0);
  EXPECT_EQ(results.at("score"), results.at("max_score")) << r.output;
  EXPECT_EQ(results.at("tests").size(), 22u);
  for (const auto& t : results.at("tests")) {
    EXPECT_EQ(t.at("status"), "passed") << t.dump(2);
    EXPECT_EQ(t.at("score"), t.at("max_score"));
  }
  const auto& p = results.at("extra_data").at("provenance");
  for (const char* key : {"commit", "libtorch", "backend", "hostname", "cpu", "cores", "seed", "date"}) {
    EXPECT_TRUE(p.contains(key)) << key;
  }
  EXPECT_EQ(p.at("submission"), "reference solutions");
  EXPECT_NE(r.output.find("graded: commit " + p.at("commit").get<std::string>()), std::string::npos) << r.output;
  // Every run the checks made is kept, with its rank logs and what it was for.
  for (const char* run : {"reference-w1", "task2b-losses-w4", "task3-timing-w4", "task3-bucket-cap0.25-w2"}) {
    EXPECT_TRUE(fs::exists(dir / "runs" / run / "run.json")) << run;
    EXPECT_TRUE(fs::exists(dir / "runs" / run / "rank0.log")) << run;
  }
  // Note [A run as long as its checks]: a full grading trains the shared 4-rank run 20 steps.
  EXPECT_EQ(max_steps_of(dir / "runs" / "task2b-losses-w4"), "20");
  // The report renders from what the grading wrote.
  const ProcessResult report = grade({"report", "--results", dir.string()}, 300);
  ASSERT_EQ(report.exit_code, 0) << report.output;
  EXPECT_TRUE(fs::exists(dir / "report" / "report.html"));
}

// `make demo` grades into out/grade, a folder relative to where the grader starts: its runs read
// files the grader wrote there (the reference's --train_order) from inside their sandbox, whose
// working folder is the scratch folder, so the grader names them by absolute paths.
// Note [Partial gradings] (grader/commands.h): a grading with --only goes to RESULTS/only/ and
// leaves the last full grading (RESULTS/results.json, RESULTS/runs/) as it was.
TEST(Grader, ARelativeResultsFolderWorksFromInsideTheSandbox) {
  const fs::path dir = dtlab::test::fresh_temp_dir("grade-relative");
  const fs::path relative = fs::relative(dir, fs::current_path());
  ASSERT_TRUE(relative.is_relative());
  const std::string full = "{\"score\": 137, \"max_score\": 137, \"tests\": []}\n";  // an earlier full grading
  dtlab::io::write_file_atomically(dir / "results.json", full);
  dtlab::io::write_file_atomically(dir / "runs" / "task2b-timing-w4" / "run.json", "{}\n");
  std::vector<std::string> args = {"check", "task2b", "--solutions", "--only", "gradients", "--results", relative.string()};
  args.insert(args.end(), kQuick.begin(), kQuick.end());
  const ProcessResult r = grade(args, 300);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(test_named(dtlab::io::read_json_file(dir / "only" / "results.json"), "task2b/gradients").at("status"),
            "passed") << r.output;
  EXPECT_EQ(dtlab::io::read_file(dir / "results.json"), full);
  EXPECT_TRUE(fs::exists(dir / "runs" / "task2b-timing-w4" / "run.json")) << "the full grading's runs were removed";
  EXPECT_TRUE(fs::exists(dir / "only" / "runs" / "task2b-losses-w4" / "rank0.log"));
  // Note [A run as long as its checks]: the gradients read step 1 of the run losses-4 shares.
  EXPECT_EQ(max_steps_of(dir / "only" / "runs" / "task2b-losses-w4"), "1");
  EXPECT_NE(r.output.find("results: " + fs::absolute(relative / "only" / "results.json").string()), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("still holds the last full one"), std::string::npos) << r.output;
}

// Note [A reference run made once] (grader/reference_cache.h): a second grading reads the kit's
// reference run from the cache, says so in its run.json, and grades the same.
TEST(Grader, ASecondGradingReadsTheReferenceRunFromTheCache) {
  const fs::path dir = dtlab::test::fresh_temp_dir("grade-reference-cache");
  std::vector<std::string> reference_cache;
  for (const char* grading : {"first", "second"}) {
    std::vector<std::string> args = {"check", "task2b", "--solutions", "--only", "gradients", "--results",
                                     (dir / grading).string(), "--reference-cache", (dir / "cache").string()};
    args.insert(args.end(), kQuick.begin(), kQuick.end());
    const ProcessResult r = grade(args, 300);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(test_named(dtlab::io::read_json_file(dir / grading / "only" / "results.json"), "task2b/gradients")
                  .at("status"), "passed") << r.output;
    // The reference that read the ranks' training order (Note [Fair evidence]): reference-<order>.
    int references = 0;
    for (const auto& e : fs::directory_iterator(dir / grading / "only" / "runs")) {
      if (e.path().filename().string().rfind("reference-", 0) != 0) continue;
      const nlohmann::json run = dtlab::io::read_json_file(e.path() / "run.json");
      EXPECT_EQ(run.at("outcome"), "ok");
      reference_cache.push_back(run.at("reference_cache"));
      ++references;
    }
    ASSERT_EQ(references, 1);
  }
  EXPECT_EQ(reference_cache[0], "") << "made by the first grading";
  EXPECT_EQ(reference_cache[1].rfind("reference-", 0), 0u) << "read by the second";
  EXPECT_TRUE(fs::is_directory(dir / "cache" / reference_cache[1]));
}

// `grader check --help` says what the instructors' guide says: the grace after a failure
// (grader_docs_test holds the guide to the code's number) and where --only writes.
TEST(Grader, HelpSaysTheGraceAfterAFailureAndWhereOnlyWrites) {
  const ProcessResult r = grade({"check", "--help"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string readme = dtlab::io::read_file(fs::path(DTLAB_SOURCE_DIR) / "docs" / "instructors" / "README.md");
  const size_t at = readme.find("`--timeout` + ");
  ASSERT_NE(at, std::string::npos);
  const std::string grace = readme.substr(at + 14, readme.find(" s", at + 14) - at - 14);
  EXPECT_NE(r.output.find("--timeout + " + grace + " s"), std::string::npos) << "the guide says + " << grace << " s:\n"
                                                                              << r.output;
  EXPECT_NE(r.output.find("written to RESULTS/only/"), std::string::npos) << r.output;
}

// dp grades against dtlab-gpt2 on the translation fixture: full marks, and the runs the report
// plots (the weak and strong scaling runs, the epochs of the learning run).
TEST(Grader, DpReferenceSolutionScoresFullMarks) {
  const fs::path dir = dtlab::test::fresh_temp_dir("grade-dp");
  std::vector<std::string> args = {"check", "dp", "--solutions", "--results", dir.string()};
  args.insert(args.end(), kQuick.begin(), kQuick.end());
  const ProcessResult r = grade(args, 900);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json results = dtlab::io::read_json_file(dir / "results.json");
  EXPECT_EQ(results.at("score"), results.at("max_score")) << r.output;
  EXPECT_EQ(results.at("tests").size(), 6u);
  for (const char* run : {"dp-losses-w4", "dp-learns-w2", "dp-timing-weak-w4", "dp-timing-strong-w4"}) {
    EXPECT_TRUE(fs::exists(dir / "runs" / run / "output" / "results.json")) << run;
  }
  // The single-process references read what the ranks read (Note [Fair evidence]): one for the
  // step-1 gradient and one per world size of the loss checks.
  int references = 0;
  for (const auto& e : fs::directory_iterator(dir / "runs")) {
    if (e.path().filename().string().rfind("reference-gpt2-steps", 0) != 0) continue;
    EXPECT_TRUE(fs::exists(e.path() / "output" / "results.json")) << e.path();
    ++references;
  }
  EXPECT_EQ(references, 3);
  const ProcessResult report = grade({"report", "--results", dir.string()}, 300);
  ASSERT_EQ(report.exit_code, 0) << report.output;
}

// pp: the schedules probed and simulated, GPipe, 1F1B and data x pipeline against one process,
// the stored and held activations, the order of sends and receives NCCL can pair; the pp losses
// share the pipeline exercise's reference run.
TEST(Grader, PpReferenceSolutionScoresFullMarks) {
  const fs::path dir = dtlab::test::fresh_temp_dir("grade-pp");
  std::vector<std::string> args = {"check", "pp", "--solutions", "--results", dir.string()};
  args.insert(args.end(), kQuick.begin(), kQuick.end());
  const ProcessResult r = grade(args, 900);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json results = dtlab::io::read_json_file(dir / "results.json");
  EXPECT_EQ(results.at("score"), results.at("max_score")) << r.output;
  EXPECT_EQ(results.at("tests").size(), 9u);
  for (const char* run : {"pp-probe-schedules", "pp-gpipe", "pp-1f1b", "pp-dp-pp", "reference-gpt2-pipeline",
                          "pp-timing-gpipe-m8", "pp-timing-1f1b-m8"}) {
    EXPECT_TRUE(fs::exists(dir / "runs" / run / "output" / "results.json")) << run;
  }
  // The report draws the stage ranks' timelines and the schedules against m (figures 10, 11).
  const ProcessResult report = grade({"report", "--results", dir.string()}, 300);
  ASSERT_EQ(report.exit_code, 0) << report.output;
  for (const char* figure : {"pp_timeline", "pp_schedules"}) {
    bool found = false;
    for (const auto& f : fs::recursive_directory_iterator(dir)) found |= f.path().filename() == std::string(figure) + ".svg";
    EXPECT_TRUE(found) << figure << " not drawn:\n" << report.output;
  }
}

TEST(Grader, UntouchedSkeletonsScoreZeroAndEveryCheckNamesItsTodo) {
  const fs::path dir = dtlab::test::fresh_temp_dir("grade-skeletons");
  std::vector<std::string> args = {"check", "all", "--results", dir.string()};
  args.insert(args.end(), kQuick.begin(), kQuick.end());
  const ProcessResult r = grade(args, 600);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const nlohmann::json results = dtlab::io::read_json_file(dir / "results.json");
  EXPECT_EQ(results.at("score").get<double>(), 0.0);
  for (const auto& t : results.at("tests")) {
    const std::string check = t.at("extra_data").at("check");
    const std::string exercise = check.substr(0, check.find('/'));
    EXPECT_EQ(t.at("extra_data").at("outcome"), "not implemented") << t.dump(2);
    EXPECT_NE(t.at("output").get<std::string>().find("TODO(" + exercise + ")"), std::string::npos) << t.dump(2);
  }
}

TEST(Grader, ReleaseHasNoSolutionsAndKeepsEverythingElse) {
  const fs::path out = dtlab::test::fresh_temp_dir("release") / "kit";
  const ProcessResult r = grade({"release", "--out", out.string()}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(out / "solutions"));
  EXPECT_FALSE(fs::exists(out / "tests" / "mutants"));
  for (const char* kept : {"CMakeLists.txt", "Makefile", "README.md", "tasks/task2b/sync.cpp", "grader/main.cpp",
                           "common/include/dtlab/tasks/task2b.h", "handouts/task2b.md", "scripts/setup.sh",
                           "plots/timing.gp", "tests/data/grade-sample/results.json"}) {
    EXPECT_TRUE(fs::exists(out / kept)) << kept;
  }
  EXPECT_EQ(dtlab::io::read_file(out / "tasks/task2b/sync.cpp"),
            dtlab::io::read_file(fs::path(DTLAB_SOURCE_DIR) / "tasks/task2b/sync.cpp"));
  // The README speaks to students: their commands, no reference solutions, no instructors' part.
  const std::string readme = dtlab::io::read_file(out / "README.md");
  EXPECT_EQ(readme, dtlab::io::read_file(fs::path(DTLAB_SOURCE_DIR) / "docs/STUDENTS.md"));
  EXPECT_EQ(readme.find("-solution"), std::string::npos);
  EXPECT_EQ(readme.find("instructors"), std::string::npos);
  EXPECT_NE(readme.find("make check-task2b"), std::string::npos);
  EXPECT_FALSE(fs::exists(out / "docs/STUDENTS.md"));
  // No answers (Note [No answers in the release]) and no instructors' notes.
  for (const char* gone : {"grader/release.cpp", "grader/release_guard.h", "tests/release_test.cpp",
                           "tests/fill_drain.h", "tests/pipeline_test.cpp", "tests/pp_schedule_test.cpp",
                           "tests/stage_lists.h", "tests/stage_simulate_test.cpp",
                           "tests/gpu_test.cpp", "docs/instructors"}) {
    EXPECT_FALSE(fs::exists(out / gone)) << gone;
  }
  EXPECT_TRUE(fs::exists(out / "docs/STAGE_SCHEDULES.md"));
  // Note [Release identity]: the commit it was made from.
  const ProcessResult head = run_process({"git", "-C", DTLAB_SOURCE_DIR, "rev-parse", "HEAD"}, 10);
  ASSERT_EQ(head.exit_code, 0) << head.output;
  const nlohmann::json identity = dtlab::io::read_json_file(out / "release.json");
  EXPECT_EQ(identity.at("kit_commit").get<std::string>() + "\n", head.output);
  EXPECT_NE(r.output.find("release.json"), std::string::npos) << r.output;
  // Refuses to write over something.
  const ProcessResult again = grade({"release", "--out", out.string()}, 120);
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("not empty"), std::string::npos) << again.output;
}

// A class's submission is a folder: it is built against this build (only its files compile)
// and graded; an exercise that does not compile fails its checks with the compiler's words, and
// one whose folder is missing is "not submitted", not a failed build (nothing was compiled).
TEST(Grader, BuildsAndGradesASubmissionFolder) {
  const fs::path dir = dtlab::test::fresh_temp_dir("grade-submission");
  const fs::path submission = dir / "student" / "tasks";
  fs::create_directories(submission / "task2b");
  fs::create_directories(submission / "task1");
  fs::create_directories(submission / "mesh");
  // The one that passes: task 2b's step-1 gradients, a run of one step (task 4's model would train three epochs).
  fs::copy_file(fs::path(DTLAB_SOURCE_DIR) / "solutions/task2b/sync.cpp", submission / "task2b/sync.cpp");
  // The mesh compiles the student's own pp, tp and zero too (exercises.txt's uses=): without them it is
  // not submitted, and says which folder it lacks.
  fs::copy_file(fs::path(DTLAB_SOURCE_DIR) / "solutions/mesh/layout.cpp", submission / "mesh/layout.cpp");
  std::ofstream(submission / "task1/train.cpp") << "this is not C++\n";
  std::vector<std::string> args = {"check", "all", "--submission", (dir / "student").string(),
                                   "--results", (dir / "grade").string(), "--only", "model,steps,gradients"};
  args.insert(args.end(), kQuick.begin(), kQuick.end());
  const ProcessResult r = grade(args, 900);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const nlohmann::json results = dtlab::io::read_json_file(dir / "grade" / "only" / "results.json");  // --only's
  EXPECT_EQ(results.at("tests").size(), 9u) << "task1/steps, task2a/task2b/task3/dp/pp/cp/mesh gradients, task4/model";
  EXPECT_EQ(test_named(results, "task2b/gradients").at("status"), "passed") << r.output;
  const nlohmann::json task1 = test_named(results, "task1/steps");
  EXPECT_EQ(task1.at("extra_data").at("outcome"), "build failed");
  EXPECT_NE(task1.at("output").get<std::string>().find("error"), std::string::npos) << task1.dump(2);
  const nlohmann::json task2a = test_named(results, "task2a/gradients");
  EXPECT_EQ(task2a.at("extra_data").at("outcome"), "not submitted");
  EXPECT_EQ(task2a.at("score"), 0);
  EXPECT_EQ(task2a.at("output").get<std::string>().rfind("[not submitted] ", 0), 0u) << task2a.dump(2);
  EXPECT_NE(task2a.at("output").get<std::string>().find("the submission has no " + (submission / "task2a").string() + "/ folder"),
            std::string::npos) << task2a.dump(2);
  for (const char* check : {"task4/model", "task3/gradients", "dp/gradients", "pp/gradients", "cp/gradients",
                            "mesh/gradients"}) {
    EXPECT_EQ(test_named(results, check).at("extra_data").at("outcome"), "not submitted") << check;
  }
  EXPECT_NE(test_named(results, "mesh/gradients").at("output").get<std::string>().find(
                "the submission has no " + (submission / "pp").string() + "/ folder, which mesh compiles with its own"),
            std::string::npos) << test_named(results, "mesh/gradients").dump(2);
  // The line printed as each check ends says it too.
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\\n  task2a/gradients +not submitted +0\\.0 s\\n"))) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\\n  task1/steps +build failed "))) << r.output;
}

// `grader run`: the ranks as local processes, a log per rank, rank 0's output followed.
TEST(Grader, RunStartsTheRanksWithALogEach) {
  const fs::path dir = dtlab::test::fresh_temp_dir("grader-run");
  const ProcessResult r = grade({"run", "task2b", "--solutions", "--world-size", "2", "--port",
                                 std::to_string(dtlab::test::free_port()), "--out", dir.string(), "--",
                                 "--max_steps", "2", "--max_seq_length", "32", "--threads", "1"},
                                300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("step=2 epoch=1 loss="), std::string::npos) << r.output;  // rank 0, followed
  for (const char* log : {"rank0.log", "rank1.log"}) EXPECT_TRUE(fs::exists(dir / "task2b" / log)) << log;
  EXPECT_TRUE(fs::exists(dir / "task2b" / "output" / "results.json"));
}

// dp takes the language-model flags: GPT-2 on the translation fixture.
TEST(Grader, RunStartsTheGpt2ExerciseOnItsOwnFixture) {
  const fs::path dir = dtlab::test::fresh_temp_dir("grader-run-dp");
  const ProcessResult r = grade({"run", "dp", "--solutions", "--world-size", "2", "--port",
                                 std::to_string(dtlab::test::free_port()), "--out", dir.string(), "--",
                                 "--max_steps", "2", "--bleu_examples", "0", "--threads", "1"},
                                300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("gpt2-tiny"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("step=2 epoch=1 loss="), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(dir / "dp" / "output" / "results.json"));
}

TEST(Grader, PrintsEveryRanksCommandAndTheLaunchersLines) {
  const ProcessResult r = grade({"run", "task3", "--hosts", "10.1.0.1,10.1.0.2,10.1.0.3", "--print-commands"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* needle : {"# on 10.1.0.3:", "--master_ip 10.1.0.1", "--world_size 3", "--local_rank 2",
                             "torchrun --nnodes=N", "--no_python", "srun --ntasks=3", "mpirun -np 3"}) {
    EXPECT_NE(r.output.find(needle), std::string::npos) << needle << " missing from:\n" << r.output;
  }
}

// Each rank program of this build: its name and path (each exercise's, its reference solution's,
// its mutants', the kit's reference run's).
std::vector<std::pair<std::string, std::string>> rank_programs_of_the_build() {
  std::ifstream table(std::string(DTLAB_SOURCE_DIR) + "/exercises.txt");
  EXPECT_TRUE(table);
  std::vector<std::string> names = {"dtlab-reference"};
  for (std::string line; std::getline(table, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::string name = line.substr(0, line.find_first_of(" \t"));
    for (const std::string& program : {name, name + "-solution", name + "-mutants"}) names.push_back(program);
  }
  std::vector<std::pair<std::string, std::string>> programs;
  for (const auto& name : names) {
    const char* path = nullptr;
    try {
      path = DTLAB_PROGRAM(name.c_str());
    } catch (const std::exception&) {  // no such program (task1 has no mutants)
    }
    if (!path || !*path) continue;  // or not in this build (a student kit has no -solution, no mutants)
    programs.emplace_back(name, path);
  }
  return programs;
}

// Note [Ranks forked from one started program] (dtlab/tooling/fork_server.h): every program a
// grading starts as ranks links the fork server (its bytes hold the marker the launcher looks
// for): each exercise's, its reference solution's, its mutants' and the kit's reference run's.
// One that lost it would only be slower, its ranks exec'd one by one, which no other test sees.
// Here and not in the unit suites: `make asan-unit` builds none of these programs.
TEST(Grader, EveryRankProgramOfTheBuildLinksTheForkServer) {
  const auto programs = rank_programs_of_the_build();
  for (const auto& [program, path] : programs) {
    EXPECT_NE(dtlab::io::read_file(path).find(dtlab::fork_server::kMarker), std::string::npos)
        << program << " (" << path << ") does not link the fork server";
  }
  EXPECT_GE(programs.size(), 14u) << "the exercises and the reference run at least";
}

// Note [The CUDA half where a GPU is] (core/cuda_half.h): every rank program holds the loader, so
// that on a machine with a GPU its ranks load the CUDA half before LibTorch first asks for CUDA. One
// that lost it would run on the CPU there, or refuse --backend nccl, and a machine without a GPU
// (CI's) would never see it. The loader is the one part of a rank program that names the variable
// (its bytes with the terminating NUL).
TEST(Grader, EveryRankProgramOfTheBuildHoldsTheCudaHalfLoader) {
  const auto programs = rank_programs_of_the_build();
  const std::string name(dtlab::kCudaHalfVariable, sizeof dtlab::kCudaHalfVariable);  // with its NUL
  for (const auto& [program, path] : programs) {
    EXPECT_NE(dtlab::io::read_file(path).find(name), std::string::npos)
        << program << " (" << path << ") does not hold the CUDA half's loader";
  }
  EXPECT_GE(programs.size(), 14u) << "the exercises and the reference run at least";
}
