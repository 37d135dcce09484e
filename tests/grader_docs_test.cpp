// What the instructors' guide, docs/instructors/README.md (and the READMEs), says
// about the grader, held to the grader's own constants, so the prose cannot drift from the code:
// the grace the other ranks get after one fails, where a partial grading (--only) goes, and a
// class loop that grades exercises that exist.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "commands.h"
#include "dtlab/io/file.h"
#include "exercises.h"
#include "runs.h"
#include "test_util.h"

namespace grader_docs_test {

namespace fs = std::filesystem;

// A student release (no solutions/) has the students' README (docs/STUDENTS.md, written as
// README.md) and no instructors' guide (docs/instructors/ stays out of it).
bool is_student_release() { return !fs::is_directory(fs::path(DTLAB_SOURCE_DIR) / "solutions"); }

// The instructors' guide, whole.
std::string instructors_section() {
  return dtlab::io::read_file(fs::path(DTLAB_SOURCE_DIR) / "docs" / "instructors" / "README.md");
}

// The text as one line: a sentence a check looks for may be wrapped anywhere.
std::string one_line(const std::string& text) { return std::regex_replace(text, std::regex("\\s*\n\\s*"), " "); }

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(GraderDocs, TheGraceAfterAFailureIsTheCodesNumber) {
  if (is_student_release()) GTEST_SKIP() << "a student release has no instructors' guide";
  const std::string section = instructors_section();
  const std::regex said("`--timeout` \\+ ([0-9.]+) s");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(section, m, said)) << "docs/instructors/README.md no longer says the grace as `--timeout` + N s";
  EXPECT_EQ(std::stod(m[1].str()), dtlab::grader::kFailureGraceSeconds)
      << "docs/instructors/README.md says `--timeout` + " << m[1].str() << " s; grader/runs.h's kFailureGraceSeconds is "
      << dtlab::grader::kFailureGraceSeconds;
}

// Note [A run that stalls] (grader/launch.cpp): the bound after which a run without progress is
// stopped, as the instructors' guide states it, is the one grader/runs.h applies.
TEST(GraderDocs, TheStallBoundIsTheCodesNumbers) {
  if (is_student_release()) GTEST_SKIP() << "a student release has no instructors' guide";
  const std::string section = one_line(instructors_section());
  const std::regex said("for the longer of `--timeout` \\+ ([0-9.]+) s \\(at least ([0-9.]+) s\\) and ([0-9.]+) times");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(section, m, said)) << "docs/instructors/README.md no longer states the stall bound:\n" << section;
  EXPECT_EQ(std::stod(m[1].str()), dtlab::grader::kFailureGraceSeconds);
  EXPECT_EQ(std::stod(m[2].str()), dtlab::grader::kStallFloorSeconds);
  EXPECT_EQ(std::stod(m[3].str()), dtlab::grader::kStallFactor);
  // The floor as the grader computes it from --timeout.
  EXPECT_EQ(dtlab::grader::stall_floor_seconds(30), 30 + dtlab::grader::kFailureGraceSeconds);
  EXPECT_EQ(dtlab::grader::stall_floor_seconds(1), dtlab::grader::kStallFloorSeconds);
}

// Note [What a grading keeps] (grader/runs.h): the instructor reads there what a grading removes
// and how to keep it.
TEST(GraderDocs, WhatAGradingKeepsIsSaid) {
  if (is_student_release()) GTEST_SKIP() << "a student release has no instructors' guide";
  const std::string section = instructors_section();
  EXPECT_TRUE(contains(section, "`--keep-runs` keeps it")) << section;
  for (const char* kept : {"`run.json`", "`sandbox.log`", "`output/results.json`", "heartbeats"}) {
    EXPECT_TRUE(contains(section, kept)) << "docs/instructors/README.md no longer says a grading keeps " << kept;
  }
}

TEST(GraderDocs, APartialGradingGoesWhereTheReadmesSay) {
  const std::string folder = dtlab::grader::kPartialFolder;
  std::vector<std::string> docs = {dtlab::io::read_file(fs::path(DTLAB_SOURCE_DIR) / "README.md")};
  if (!is_student_release()) {
    EXPECT_TRUE(contains(instructors_section(), fmt::format("`OUT/{}/`", folder)));
    docs.push_back(dtlab::io::read_file(fs::path(DTLAB_SOURCE_DIR) / "docs" / "STUDENTS.md"));
  }
  for (const std::string& doc : docs) {
    EXPECT_TRUE(contains(doc, "--only gradients` runs one") &&
                contains(doc, fmt::format("into `out/grade/{}/`", folder)))
        << "a README shows --only without saying it writes out/grade/" << folder << "/";
  }
}

// The loop an instructor copies names the exercises it grades, each one the kit has: `check all`
// would mark a class on every exercise of the kit.
TEST(GraderDocs, TheClassLoopGradesNamedExercisesThatExist) {
  if (is_student_release()) GTEST_SKIP() << "a student release has no instructors' guide";
  const std::string section = instructors_section();
  const std::regex loop("for d in submissions/[^\\n]*\\n[^\\n]*grader\" check ([a-z0-9,]+) --submission \"\\$d\"");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(section, m, loop)) << "no class loop in docs/instructors/README.md:\n" << section;
  const std::string which = m[1].str();
  EXPECT_NE(which, "all");
  EXPECT_TRUE(contains(which, ",")) << "the loop should show how to name several exercises: " << which;
  for (size_t start = 0; start <= which.size();) {
    const size_t comma = std::min(which.find(',', start), which.size());
    EXPECT_NO_THROW(dtlab::grader::exercise(which.substr(start, comma - start))) << which;
    start = comma + 1;
  }
}

}  // namespace grader_docs_test
