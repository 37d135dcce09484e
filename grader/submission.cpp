// Building a submission, see submission.h.
#include "submission.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <sstream>

#include "dtlab/core/error.h"
#include "dtlab/tooling/process.h"
#include "folder_lock.h"

namespace fs = std::filesystem;

namespace dtlab::grader {
namespace {

// The compiler's own words: the lines that say error, else the end of the output.
std::string compiler_errors(const std::string& output) {
  std::istringstream in(output);
  std::string errors, tail;
  int count = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("error") != std::string::npos && count < 12) {
      errors += "    " + line + "\n";
      ++count;
    }
    tail = line;
  }
  return errors.empty() ? "    " + tail + "\n" : errors;
}

}  // namespace

fs::path submission_tasks_root(const fs::path& submission) {
  if (!fs::is_directory(submission)) throw Error("--submission " + submission.string() + " is not a folder");
  return fs::is_directory(submission / "tasks") ? submission / "tasks" : submission;
}

SubmissionBuild build_submission(const fs::path& submission, const std::vector<std::string>& exercises,
                                 const fs::path& source_dir, const fs::path& build_dir) {
  const fs::path root = fs::absolute(submission_tasks_root(submission));
  SubmissionBuild build;
  std::vector<std::string> present;
  for (const auto& e : exercises) {
    if (fs::is_directory(root / e)) present.push_back(e);
    else build.failures[e] = fmt::format("the submission has no {}/ folder", (root / e).string());
  }
  if (present.empty()) return build;
  const FolderLock lock(build_dir, /*wait_seconds=*/1800);  // submissions build one at a time
  fmt::print("grader: building {} from {}\n", fmt::join(present, ", "), root.string());
  std::fflush(stdout);
  const ProcessResult configure = run_process({"cmake", "-S", source_dir.string(), "-B", build_dir.string(),
                                               "-DDTLAB_SUBMISSION_DIR=" + root.string()}, 600);
  if (configure.exit_code != 0) {
    throw Error("cmake could not configure the submission build in " + build_dir.string() + ":\n" +
                compiler_errors(configure.output));
  }
  for (const auto& e : present) {
    const ProcessResult r = run_process({"cmake", "--build", build_dir.string(), "--target", "submission-" + e}, 900);
    const fs::path binary = build_dir / "submission" / e;
    if (r.exit_code == 0 && fs::exists(binary)) {
      build.binaries[e] = binary;
    } else {
      build.failures[e] = fmt::format("{}/ does not compile{}:\n{}", (root / e).string(),
                                      r.timed_out ? " (the build timed out)" : "", compiler_errors(r.output));
    }
  }
  return build;
}

}  // namespace dtlab::grader
