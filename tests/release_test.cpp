// The student release carries no answers and names what it was made from: the guard of Note [No
// answers in the release] (grader/release_guard.h) on this kit and on planted copies, the files
// left out, and Note [Release identity] (grader/provenance.h) in a grade's provenance.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/io/file.h"
#include "gradescope.h"
#include "provenance.h"
#include "release.h"
#include "release_guard.h"
#include "test_util.h"

// One namespace for the whole file: unit suites are compiled in groups (Note [Unity builds]),
// so nothing here may leak into the next file.
namespace release_test {

namespace fs = std::filesystem;
using dtlab::grader::AnswerLeak;
using dtlab::grader::find_answer_leaks;

// A folder outside any git checkout (the build tree is inside one), so provenance sees no commit.
fs::path outside_git(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("dtlab-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

bool has_solutions() { return fs::is_directory(fs::path(DTLAB_SOURCE_DIR) / "solutions"); }

// ---------------------------------------------------------------------------------------------
// The guard on planted copies: a solution with one long body (40 tokens) and one short one.

constexpr const char* kSolution =
    "int ticks(int m, int n) {\n"
    "  // BEGIN TODO(ex): count the ticks.\n"
    "  int total = 0;\n"                                          // line 3: 6 tokens
    "  for (int k = 0; k < m + n - 1; ++k) {\n"                  // 21
    "    total += k % 2 == 0 ? m : n;  // the reference's note\n"  // 13
    "  }\n"                                                      // 1
    "  return total;\n"                                          // 3
    "  // END TODO\n"
    "}\n"
    "int first(int m) {\n"
    "  // BEGIN TODO(ex): return m.\n"
    "  return m;\n"
    "  // END TODO\n"
    "}\n";

std::vector<AnswerLeak> leaks_of(const std::string& shipped_text, const std::string& name = "tests/shipped.cpp") {
  const fs::path kit = outside_git("guard");
  write(kit / "solutions/ex/ex.cpp", kSolution);
  write(kit / name, shipped_text);
  auto leaks = find_answer_leaks(kit, {name});
  fs::remove_all(kit);
  return leaks;
}

TEST(ReleaseGuard, FindsAVerbatimCopyNamingFileLineTodoAndSolution) {
  const auto leaks = leaks_of("// a test\n\nint helper(int m, int n) {\n  int total = 0;\n"
                              "  for (int k = 0; k < m + n - 1; ++k) {\n    total += k % 2 == 0 ? m : n;\n  }\n"
                              "  return total;\n}\n");
  ASSERT_EQ(leaks.size(), 1u);
  EXPECT_EQ(leaks[0].file, "tests/shipped.cpp");
  EXPECT_EQ(leaks[0].line, 4u);
  EXPECT_EQ(leaks[0].exercise, "ex");
  EXPECT_EQ(leaks[0].solution, "solutions/ex/ex.cpp:3");
  EXPECT_EQ(dtlab::grader::describe(leaks[0]).rfind("tests/shipped.cpp:4: holds the reference code of TODO(ex) "
                                                    "(solutions/ex/ex.cpp:3): `int total = 0 ;",
                                                    0),
            0u)
      << dtlab::grader::describe(leaks[0]);
}

TEST(ReleaseGuard, FindsACopyReflowedAndRecommented) {
  EXPECT_EQ(leaks_of("int total=0; /* mine */ for(int k=0;k<m+n-1;++k){ total += k % 2 == 0 ? m : n; // why\n"
                     "} return total;\n")
                .size(),
            1u);
}

// 25 tokens in a row from the middle of the body, inside other code.
TEST(ReleaseGuard, FindsAPartialCopyOfTheWindowsLength) {
  const std::string window = "( int k = 0 ; k < m + n - 1 ; + + k ) { total + = k % 2";
  ASSERT_EQ(dtlab::grader::kLeakWindowTokens, 25u) << "the window above is 25 tokens";
  EXPECT_EQ(leaks_of("void other() {\n  while " + window + " ; }\n}\n").size(), 1u);
  // One token fewer is not a copy.
  EXPECT_TRUE(leaks_of("void other() {\n  while " + window.substr(0, window.rfind(" 2")) + " ; }\n}\n").empty());
}

// A "/*" that opens no comment (a glob in prose, a string) must not hide what follows it.
TEST(ReleaseGuard, FindsACopyAfterAGlobInProseOrInAString) {
  const std::string body = "int total = 0;\nfor (int k = 0; k < m + n - 1; ++k) {\n  total += k % 2 == 0 ? m : n;\n}\n";
  EXPECT_EQ(leaks_of("The bodies of solutions/*/*.cpp, e.g.\n```cpp\n" + body + "```\n", "docs/NOTES.md").size(), 1u);
  EXPECT_EQ(leaks_of("const char* glob = \"docs/*.md\";\n" + body).size(), 1u);
  // In C++ a comment is a comment, whatever it holds.
  EXPECT_TRUE(leaks_of("/* " + body + " */\n").empty());
}

// What the skeleton ships of a region (its TODO's words) and a body shorter than the window (the
// call the TODO names) are not answers the guard can tell from the kit's own code.
TEST(ReleaseGuard, TheTodosWordsAndShortBodiesPass) {
  EXPECT_TRUE(leaks_of("int first(int m) {\n  // TODO(ex): return m.\n  return m;\n}\n").empty());
  EXPECT_TRUE(leaks_of("  // TODO(ex): count the ticks.\n  throw dtlab::NotImplemented(\"TODO(ex): count the ticks.\");\n")
                  .empty());
}

TEST(ReleaseGuard, NoSolutionsFolderMeansNothingToCompare) {
  const fs::path kit = outside_git("guard-none");
  write(kit / "tests/shipped.cpp", "int x;\n");
  EXPECT_TRUE(find_answer_leaks(kit, {"tests/shipped.cpp"}).empty());
  fs::remove_all(kit);
}

// ---------------------------------------------------------------------------------------------
// The guard on this kit

// Run over solutions/ itself, the guard finds their long bodies (clock_cycles' in its own file):
// it reads the real regions, so an empty result on the release below means something.
TEST(ReleaseGuard, FindsTheKitsLongBodiesInSolutionsClockCyclesInItsOwnFile) {
  if (!has_solutions()) GTEST_SKIP() << "a student release has no solutions/";
  const fs::path source(DTLAB_SOURCE_DIR);
  std::vector<std::string> solutions;
  for (const auto& e : fs::recursive_directory_iterator(source / "solutions")) {
    if (e.is_regular_file()) solutions.push_back(fs::relative(e.path(), source).generic_string());
  }
  const auto leaks = find_answer_leaks(source, solutions);
  EXPECT_GE(leaks.size(), 15u) << "the kit's solutions hold more than 15 bodies of 25 tokens or more";
  // clock_cycles' body (its first line, 27) in its own file.
  const bool clock_cycles = std::any_of(leaks.begin(), leaks.end(), [](const AnswerLeak& l) {
    return l.file == "solutions/pipeline/pipeline.cpp" && l.solution == "solutions/pipeline/pipeline.cpp:27" &&
           l.exercise == "pipeline";
  });
  EXPECT_TRUE(clock_cycles);
}

TEST(ReleaseGuard, TheKitsReleaseShipsNoTodosReferenceCode) {
  if (!has_solutions()) GTEST_SKIP() << "a student release has no solutions/";
  const fs::path source(DTLAB_SOURCE_DIR);
  std::vector<std::string> shipped = dtlab::grader::release_files(source);
  std::replace(shipped.begin(), shipped.end(), std::string("README.md"), std::string("docs/STUDENTS.md"));
  for (const AnswerLeak& leak : find_answer_leaks(source, shipped)) ADD_FAILURE() << describe(leak);
}

// Files that hold an answer the guard cannot see (written anew), and instructors' notes.
TEST(Release, LeavesOutTheTestsThatHoldAnswersAndTheInstructorsNotes) {
  using dtlab::grader::left_out_of_release;
  for (const char* path : {"tests/fill_drain.h", "tests/pipeline_test.cpp", "tests/pp_schedule_test.cpp",
                           "tests/stage_lists.h", "tests/stage_simulate_test.cpp", "tests/gpu_test.cpp", "docs/instructors/STAGE_SCHEDULE_MUTANTS.md", "solutions/pp/schedule.cpp",
                           "grader/release.cpp", "tests/release_test.cpp"}) {
    EXPECT_TRUE(left_out_of_release(path)) << path;
  }
  for (const char* path : {"grader/main.cpp", "tests/sampler_test.cpp", "docs/STAGE_SCHEDULES.md",
                           "handouts/pp.md", "tasks/pp/schedule.cpp"}) {
    EXPECT_FALSE(left_out_of_release(path)) << path;
  }
}

// handouts/pp.md asks which (n, m) a warm-up counted from the wrong end first fails at and what
// the simulator says; the instructors' note answers it, the release must not.
TEST(Release, ShipsNoAnswerToTheWrongEndWarmUpQuestion) {
  if (!has_solutions()) GTEST_SKIP() << "a student release has no solutions/";
  const fs::path source(DTLAB_SOURCE_DIR);
  // In two pieces, so that this file, which ships, does not hold it.
  const std::string answer = std::string("the schedules of 2 stages for 2 ") + "micro-batches deadlock";
  ASSERT_NE(dtlab::io::read_file(source / "docs/instructors/STAGE_SCHEDULE_MUTANTS.md").find(answer), std::string::npos)
      << "the instructors' note no longer holds the answer this test looks for";
  for (const std::string& path : dtlab::grader::release_files(source)) {
    EXPECT_EQ(dtlab::io::read_file(source / path).find(answer), std::string::npos) << path;
  }
}

// ---------------------------------------------------------------------------------------------
// Note [Release identity]

TEST(Provenance, Fnv1aMatchesThePublishedValues) {
  EXPECT_EQ(dtlab::grader::fnv1a64_hex(""), "cbf29ce484222325");
  EXPECT_EQ(dtlab::grader::fnv1a64_hex("a"), "af63dc4c8601ec8c");
  EXPECT_EQ(dtlab::grader::fnv1a64_hex("foobar"), "85944171f73967e8");
}

TEST(Provenance, TheSourcesHashFollowsEveryFileAndNotTheFolder) {
  const fs::path a = outside_git("sources-a"), b = outside_git("sources-b");
  for (const fs::path& d : {a, b}) {
    write(d / "task1/train.cpp", "int x = 1;\n");
    write(d / "pp/schedule.cpp", "int y = 2;\n");
  }
  using dtlab::grader::sources_identity;
  const std::string hash = sources_identity(a).at("fnv1a64");
  EXPECT_EQ(sources_identity(a).at("files"), 2);
  EXPECT_EQ(sources_identity(b).at("fnv1a64"), hash) << "the same files in another folder";
  // One file's layout, by hand: path, NUL, size, NUL, bytes.
  const fs::path one = outside_git("sources-one");
  write(one / "a.cpp", "int x;\n");
  EXPECT_EQ(sources_identity(one).at("fnv1a64"), dtlab::grader::fnv1a64_hex(std::string("a.cpp\0" "7\0int x;\n", 15)));
  write(b / "task1/train.cpp", "int x = 2;\n");
  EXPECT_NE(sources_identity(b).at("fnv1a64"), hash) << "one byte changed";
  write(b / "task1/train.cpp", "int x = 1;\n");
  fs::rename(b / "pp/schedule.cpp", b / "pp/other.cpp");
  EXPECT_NE(sources_identity(b).at("fnv1a64"), hash) << "a file renamed";
  fs::rename(b / "pp/other.cpp", b / "pp/schedule.cpp");
  EXPECT_EQ(sources_identity(b).at("fnv1a64"), hash);
  write(b / "empty.h", "");
  EXPECT_NE(sources_identity(b).at("fnv1a64"), hash) << "an empty file added";
  EXPECT_THROW_WITH(sources_identity(a / "nope"), dtlab::Error, "nope are not a folder");
  for (const fs::path& d : {a, b, one}) fs::remove_all(d);
}

// A release is no git checkout: the grade names the kit's commit from release.json, and the
// student's files by their hash, instead of "commit unknown".
TEST(Provenance, AReleaseNamesTheKitsCommitAndTheStudentsFiles) {
  const fs::path release = outside_git("release-identity");
  write(release / "tasks/task1/train.cpp", "int answer = 42;\n");
  const nlohmann::json bare = dtlab::grader::collect_provenance(release, "your tasks/", "gloo", release / "tasks");
  EXPECT_EQ(bare.at("commit"), "unknown") << "neither git nor release.json";
  EXPECT_FALSE(bare.contains("release"));

  write(release / "release.json", R"({"kit_commit": "0123456789abcdef0123456789abcdef01234567",
    "kit_commit_short": "0123456", "kit_dirty": false, "made": "2026-11-27T10:00:00Z"})");
  const nlohmann::json p = dtlab::grader::collect_provenance(release, "your tasks/", "gloo", release / "tasks");
  EXPECT_EQ(p.at("commit"), "0123456 (release)");
  EXPECT_EQ(p.at("release").at("kit_commit"), "0123456789abcdef0123456789abcdef01234567");
  EXPECT_EQ(p.at("sources").at("files"), 1);
  const std::string hash = p.at("sources").at("fnv1a64");
  const std::string line = dtlab::grader::describe_provenance(p);
  EXPECT_EQ(line.rfind("commit 0123456 (release), sources " + hash + " (1 files of ", 0), 0u) << line;

  write(release / "tasks/task1/train.cpp", "int answer = 43;\n");
  EXPECT_NE(dtlab::grader::collect_provenance(release, "your tasks/", "gloo", release / "tasks").at("sources").at("fnv1a64"),
            hash) << "another student's file";
  fs::remove_all(release);
}

}  // namespace release_test
