// Building a submission: a student's tasks/ (or a folder holding task1/ ... task4/) compiled
// against this build's library and drivers, as extra targets submission-T of the same CMake
// build (DTLAB_SUBMISSION_DIR), so only the student's files and a link are new work.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "sandbox.h"

namespace dtlab::grader {

struct SubmissionBuild {
  std::map<std::string, std::filesystem::path> binaries;  // exercise -> built binary
  std::map<std::string, std::string> failures;            // exercise -> why it did not build
};

// The folder whose subfolders are task1/, task2a/, ...: DIR/tasks when it exists, else DIR.
// Throws dtlab::Error when DIR is not a folder.
std::filesystem::path submission_tasks_root(const std::filesystem::path& submission);

// The exercises whose folder the submission lacks, each with the folder looked for ("the
// submission has no DIR/task2a/ folder"): not submitted, which is not a failed build.
std::map<std::string, std::string> missing_exercises(const std::filesystem::path& submission,
                                                     const std::vector<std::string>& exercises);

// Builds the exercises the submission has (missing_exercises are skipped: neither built nor in
// failures). The compile runs in the sandbox's compile jail (sandbox.h): it sees the kit's sources and build
// tree but not solutions/, the grader's mutants, what they built, .git or the results folder.
SubmissionBuild build_submission(const std::filesystem::path& submission, const std::vector<std::string>& exercises,
                                 const std::filesystem::path& source_dir, const std::filesystem::path& build_dir,
                                 const Sandbox& sandbox, const std::filesystem::path& results_dir);

}  // namespace dtlab::grader
