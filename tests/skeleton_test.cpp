// Student skeletons (Note [Exercise regions] in tooling/skeleton.h): the text transformation, its
// errors, and that tasks/ is what solutions/ generates.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sstream>
#include <string>

#include "dtlab/core/error.h"
#include "dtlab/tooling/skeleton.h"
#include "dtlab/io/file.h"
#include "test_util.h"

// Everything in a namespace named after the file (no anonymous namespace): the unit suites share
// one binary, compiled in groups of files (Note [Unity builds] in cmake/Dtlab.cmake), so helpers
// must not collide, and a TEST_F class must not derive from a type of an anonymous namespace.
namespace skeleton_test {

namespace fs = std::filesystem;

// What make_skeleton puts before the file: the skeleton of an empty file.
std::string banner() { return dtlab::make_skeleton("", "empty.cpp"); }

// ---------------------------------------------------------------------------------------------
// make_skeleton

TEST(MakeSkeleton, BannerIsANonEmptyCommentBlock) {
  const std::string b = banner();
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(b.back(), '\n');
  std::istringstream in(b);
  std::string line;
  while (std::getline(in, line)) EXPECT_EQ(line.rfind("//", 0), 0u) << "not a comment: " << line;
}

TEST(MakeSkeleton, ReplacesARegionWithTheTodoAndAThrowAtItsIndentation) {
  const std::string solution =
      "int f(int x) {\n"
      "  int y = 0;\n"
      "  // BEGIN TODO(task1): add one to x\n"
      "  y = x + 1;\n"
      "  return y;\n"
      "  // END TODO\n"
      "}\n";
  EXPECT_EQ(dtlab::make_skeleton(solution, "f.cpp"),
            banner() +
                "int f(int x) {\n"
                "  int y = 0;\n"
                "  // TODO(task1): add one to x\n"
                "  throw dtlab::NotImplemented(\"TODO(task1): add one to x\");\n"
                "}\n");
}

TEST(MakeSkeleton, KeepsTabAndDeepIndentationAndEveryRegion) {
  const std::string solution =
      "void g() {\n"
      "\tif (true) {\n"
      "\t    // BEGIN TODO(ex_2): first part\n"
      "\t    a();\n"
      "\t    // END TODO\n"
      "\t}\n"
      "// BEGIN TODO(ex3): second part\n"
      "b();\n"
      "// END TODO\n"
      "}\n";
  EXPECT_EQ(dtlab::make_skeleton(solution, "g.cpp"),
            banner() +
                "void g() {\n"
                "\tif (true) {\n"
                "\t    // TODO(ex_2): first part\n"
                "\t    throw dtlab::NotImplemented(\"TODO(ex_2): first part\");\n"
                "\t}\n"
                "// TODO(ex3): second part\n"
                "throw dtlab::NotImplemented(\"TODO(ex3): second part\");\n"
                "}\n");
}

TEST(MakeSkeleton, EscapesQuotesAndBackslashesInTheThrownMessage) {
  const std::string solution =
      "  // BEGIN TODO(t): print \"done\\n\" to stdout\n"
      "  std::puts(\"done\");\n"
      "  // END TODO\n";
  // The comment keeps the words as written; the string literal escapes " and \ so that it
  // compiles and its value is the comment's text.
  EXPECT_EQ(dtlab::make_skeleton(solution, "p.cpp"),
            banner() +
                "  // TODO(t): print \"done\\n\" to stdout\n"
                "  throw dtlab::NotImplemented(\"TODO(t): print \\\"done\\\\n\\\" to stdout\");\n");
}

TEST(MakeSkeleton, DropsTrailingWhitespaceAfterTheTodoText) {
  const std::string solution = "// BEGIN TODO(t): do it   \t\n x();\n// END TODO  \n";
  EXPECT_EQ(dtlab::make_skeleton(solution, "w.cpp"),
            banner() + "// TODO(t): do it\nthrow dtlab::NotImplemented(\"TODO(t): do it\");\n");
}

TEST(MakeSkeleton, FileWithoutRegionsIsUnchangedAfterTheBanner) {
  const std::string text =
      "#include <x>\n"
      "\n"
      "// An ordinary comment mentioning TODO and BEGIN.\n"
      "int main() { return 0; }  // BEGIN TODO(x): not at the start of a line\n"
      "\t  \n";
  EXPECT_EQ(dtlab::make_skeleton(text, "m.cpp"), banner() + text);
}

TEST(MakeSkeleton, UnclosedRegionIsAnErrorAtItsBeginLine) {
  const std::string text = "a\nb\n  // BEGIN TODO(t): x\nc\nd\n";
  EXPECT_THROW_WITH(dtlab::make_skeleton(text, "u.cpp"), dtlab::Error, "u.cpp:3:");
  EXPECT_THROW_WITH(dtlab::make_skeleton(text, "u.cpp"), dtlab::Error, "never closed");
}

TEST(MakeSkeleton, EndWithoutBeginIsAnErrorAtTheEndLine) {
  const std::string text = "a\n  // END TODO\n";
  EXPECT_THROW_WITH(dtlab::make_skeleton(text, "e.cpp"), dtlab::Error,
                    "e.cpp:2: END TODO without a BEGIN TODO");
  // A second END after a closed region too.
  const std::string twice = "// BEGIN TODO(t): x\ny\n// END TODO\n// END TODO\n";
  EXPECT_THROW_WITH(dtlab::make_skeleton(twice, "e.cpp"), dtlab::Error, "e.cpp:4:");
}

TEST(MakeSkeleton, NestedBeginIsAnErrorNamingBothLines) {
  const std::string text = "x\n// BEGIN TODO(a): one\ny\n  // BEGIN TODO(b): two\n// END TODO\n// END TODO\n";
  EXPECT_THROW_WITH(dtlab::make_skeleton(text, "n.cpp"), dtlab::Error,
                    "n.cpp:4: BEGIN TODO inside the region opened at line 2");
}

TEST(MakeSkeleton, MalformedMarkerIsAnErrorSayingTheExpectedForm) {
  const char* malformed[] = {
      "//BEGIN TODO(t): no space after the slashes",
      "// BEGIN TODO: no exercise",
      "  // BEGIN TODO(t):",  // no text
      "// BEGIN TODO(two words): bad exercise name",
      "// END TODO and more",
  };
  for (const char* marker : malformed) {
    const std::string text = std::string("int a;\n") + marker + "\nint b;\n// END TODO\n";
    EXPECT_THROW_WITH(dtlab::make_skeleton(text, "bad.cpp"), dtlab::Error, "bad.cpp:2:");
    EXPECT_THROW_WITH(dtlab::make_skeleton(text, "bad.cpp"), dtlab::Error,
                      "// BEGIN TODO(<exercise>): <text>");
  }
}

TEST(CountExerciseRegions, CountsWellFormedBeginMarkers) {
  EXPECT_EQ(dtlab::count_exercise_regions(""), 0);
  EXPECT_EQ(dtlab::count_exercise_regions("int x;\n// TODO(t): later\n"), 0);
  EXPECT_EQ(dtlab::count_exercise_regions("  // BEGIN TODO(t): a\nx\n  // END TODO\n"
                                          "// BEGIN TODO(u): b\ny\n// END TODO\n"),
            2);
  EXPECT_EQ(dtlab::count_exercise_regions("// BEGIN TODO: malformed\n"), 0);
}

// ---------------------------------------------------------------------------------------------
// tasks/ is generated from solutions/

TEST(SkeletonSync, EveryTaskFileEqualsTheSkeletonOfItsSolution) {
  if (!fs::is_directory(fs::path(DTLAB_SOURCE_DIR) / "solutions")) {
    GTEST_SKIP() << "a student release has no solutions/ to compare tasks/ with";
  }
  const auto plan = dtlab::plan_skeletons(fs::path(DTLAB_SOURCE_DIR) / "solutions", fs::path(DTLAB_SOURCE_DIR) / "tasks");
  EXPECT_FALSE(plan.empty());
  for (const dtlab::SkeletonFile& f : plan) {
    ASSERT_TRUE(fs::exists(f.task))
        << f.task << " is missing (generated from " << f.solution << "): run `make skeletons`";
    EXPECT_TRUE(dtlab::io::read_file(f.task) == f.expected)
        << f.task << " differs from the skeleton of " << f.solution << ": run `make skeletons`";
  }
}

TEST(SkeletonSync, EveryTaskSourceHasASolutionTwin) {
  if (!fs::is_directory(fs::path(DTLAB_SOURCE_DIR) / "solutions")) {
    GTEST_SKIP() << "a student release has no solutions/ to compare tasks/ with";
  }
  const fs::path tasks = fs::path(DTLAB_SOURCE_DIR) / "tasks", solutions = fs::path(DTLAB_SOURCE_DIR) / "solutions";
  int seen = 0;
  for (const auto& entry : fs::recursive_directory_iterator(tasks)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".cpp") continue;
    ++seen;
    const fs::path twin = solutions / fs::relative(entry.path(), tasks);
    EXPECT_TRUE(fs::exists(twin)) << entry.path() << " has no reference solution " << twin
                                  << " (tasks/ is generated from solutions/)";
  }
  EXPECT_GT(seen, 0);
}

TEST(SkeletonSync, EverySolutionFileHasAnExerciseRegion) {
  if (!fs::is_directory(fs::path(DTLAB_SOURCE_DIR) / "solutions")) {
    GTEST_SKIP() << "a student release has no solutions/ to compare tasks/ with";
  }
  for (const dtlab::SkeletonFile& f :
       dtlab::plan_skeletons(fs::path(DTLAB_SOURCE_DIR) / "solutions", fs::path(DTLAB_SOURCE_DIR) / "tasks")) {
    EXPECT_GE(dtlab::count_exercise_regions(dtlab::io::read_file(f.solution)), 1)
        << f.solution << " has no // BEGIN TODO(<exercise>): region";
  }
}

}  // namespace skeleton_test
