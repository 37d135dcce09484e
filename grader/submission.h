// Building a submission: a student's tasks/ (or a folder holding task1/ ... task4/) compiled
// against this build's library and drivers with the flags of this build's own program T (Note
// [Submission commands] in submission.cpp), so only the student's files and a link are new work.
// It compiles in a folder of its own (Note [The compile jail], sandbox.h); the instructor's build
// is only read.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sandbox.h"

namespace dtlab::grader {

// A folder removed with its contents when the last copy of its owner goes.
struct TemporaryFolder {
  explicit TemporaryFolder(std::filesystem::path p) : path(std::move(p)) {}
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;
  ~TemporaryFolder();
  std::filesystem::path path;
};

struct SubmissionBuild {
  std::map<std::string, std::filesystem::path> binaries;  // exercise -> built binary, in folder
  std::map<std::string, std::string> failures;            // exercise -> why it did not build
  std::shared_ptr<TemporaryFolder> folder;                // the binaries' folder: keep it while grading
};

// The folder whose subfolders are task1/, task2a/, ...: DIR/tasks when it exists, else DIR.
// Throws dtlab::Error when DIR is not a folder.
std::filesystem::path submission_tasks_root(const std::filesystem::path& submission);

// The exercises whose folder the submission lacks, each with the folder looked for ("the
// submission has no DIR/task2a/ folder"): not submitted, which is not a failed build.
std::map<std::string, std::string> missing_exercises(const std::filesystem::path& submission,
                                                     const std::vector<std::string>& exercises);

// Builds the exercises the submission has (missing_exercises are skipped: neither built nor in
// failures) into a temporary folder (SubmissionBuild::folder, mode 0700). The compile runs in the sandbox's compile jail (sandbox.h):
// in bwrap mode it sees of the kit only common/, build/common/ and the drivers' objects,
// read-only: not solutions/, the grader's mutants, what they built, .git or any results folder.
SubmissionBuild build_submission(const std::filesystem::path& submission, const std::vector<std::string>& exercises,
                                 const std::filesystem::path& source_dir, const std::filesystem::path& build_dir,
                                 const Sandbox& sandbox);

}  // namespace dtlab::grader
