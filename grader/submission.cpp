// Building a submission, see submission.h.
#include "submission.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iterator>
#include <sstream>

#include "dtlab/core/error.h"
#include "dtlab/tooling/process.h"
#include "folder_lock.h"
#include "release.h"

namespace fs = std::filesystem;

namespace dtlab::grader {
namespace {

// The compiler's own words: the lines that say error, else the end of the output.
std::string compiler_errors(const std::string& output) {
  std::istringstream in(output);
  std::string errors, tail;
  int count = 0;
  for (std::string line; std::getline(in, line);) {
    if ((line.find("error") != std::string::npos || line.find("CMake Error") != std::string::npos) && count < 12) {
      errors += "    " + line + "\n";
      ++count;
    }
    tail = line;
  }
  return errors.empty() ? "    " + tail + "\n" : errors;
}

// What a submission's compile must not read (Note [The sandbox]): the reference solutions, the
// grader's mutants and the tests that hold answers (the files a student release leaves out,
// release.h) as unreadable files, so the build's globs still list them; what they built (the
// *-solution and *-mutants targets and their objects); .git (the solutions' history); other
// gradings' results.
//
// Except the unit suites among those tests: the configure reads every unit suite's source for its
// TEST names (dtlab_unit_suite, cmake/Dtlab.cmake), and fails on an unreadable one. Such a file is
// no answer to #include: its TESTs need GoogleTest's library, which a submission does not link,
// and pipeline_test.cpp's schedule comes from fill_drain.h, stage_simulate_test.cpp's lists from
// stage_lists.h, which stay hidden.
constexpr const char* kReadByConfigure[] = {"tests/pipeline_test.cpp", "tests/stage_simulate_test.cpp"};

std::vector<fs::path> hidden_from_compile(const fs::path& source_dir, const fs::path& build_dir,
                                          const fs::path& results_dir) {
  std::vector<fs::path> hidden;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(source_dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const fs::path relative = fs::relative(it->path(), source_dir, ec);
    const std::string top = relative.begin()->string();
    if (it->is_directory(ec) && it.depth() == 0 &&
        (top == ".git" || top == "out" || top == ".torch" || top == "fixtures" || top.rfind("build", 0) == 0)) {
      // Another build tree in the source folder holds reference binaries too.
      const bool other_build = top.rfind("build", 0) == 0 && !fs::equivalent(it->path(), build_dir, ec);
      if (top == ".git" || top == "out" || other_build) hidden.push_back(it->path());
      it.disable_recursion_pending();
      continue;
    }
    const std::string path = relative.generic_string();
    const bool read_by_configure = std::find(std::begin(kReadByConfigure), std::end(kReadByConfigure), path) !=
                                   std::end(kReadByConfigure);
    if (it->is_regular_file(ec) && left_out_of_release(path) && top != "bench" && top != "docs" && !read_by_configure) {
      hidden.push_back(it->path());
    }
  }
  // The build tree: the tests and benchmarks (they compile solution sources in), and the
  // solutions' programs and objects. Configure still writes its files there (into the tmpfs).
  for (const char* folder : {"tests", "bench"}) {
    if (fs::is_directory(build_dir / folder, ec)) hidden.push_back(build_dir / folder);
  }
  for (const fs::path& folder : {build_dir, build_dir / "CMakeFiles"}) {
    for (auto it = fs::directory_iterator(folder, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      const std::string name = it->path().filename().string();
      auto ends_with = [&](const std::string& end) {
        return name.size() >= end.size() && name.compare(name.size() - end.size(), end.size(), end) == 0;
      };
      if (ends_with("-solution") || ends_with("-solution.dir")) hidden.push_back(it->path());
    }
  }
  if (fs::is_directory(results_dir, ec)) hidden.push_back(fs::absolute(results_dir));
  return hidden;
}

}  // namespace

fs::path submission_tasks_root(const fs::path& submission) {
  if (!fs::is_directory(submission)) throw Error("--submission " + submission.string() + " is not a folder");
  return fs::is_directory(submission / "tasks") ? submission / "tasks" : submission;
}

std::map<std::string, std::string> missing_exercises(const fs::path& submission,
                                                     const std::vector<std::string>& exercises) {
  const fs::path root = fs::absolute(submission_tasks_root(submission));
  std::map<std::string, std::string> missing;
  for (const auto& e : exercises) {
    if (!fs::is_directory(root / e)) missing[e] = fmt::format("the submission has no {}/ folder", (root / e).string());
  }
  return missing;
}

SubmissionBuild build_submission(const fs::path& submission, const std::vector<std::string>& exercises,
                                 const fs::path& source_dir, const fs::path& build_dir, const Sandbox& sandbox,
                                 const fs::path& results_dir) {
  const fs::path root = fs::absolute(submission_tasks_root(submission));
  SubmissionBuild build;
  const std::map<std::string, std::string> missing = missing_exercises(submission, exercises);
  std::vector<std::string> present;
  for (const auto& e : exercises) {
    if (!missing.count(e)) present.push_back(e);
  }
  if (present.empty()) return build;
  const FolderLock lock(build_dir, /*wait_seconds=*/1800);  // submissions build one at a time
  fmt::print("grader: building {} from {}\n", fmt::join(present, ", "), root.string());
  std::fflush(stdout);
  // A student's compile neither reads nor writes the instructor's compiler cache (Note [Compiler
  // cache]): DTLAB_CCACHE=OFF makes cmake/ccache_launcher.sh run the compiler straight.
  CompileJail jail;
  jail.visible = {fs::absolute(source_dir), root};
  jail.writable = {fs::absolute(build_dir)};
  jail.hidden = hidden_from_compile(fs::absolute(source_dir), fs::absolute(build_dir), results_dir);
  const ProcessResult configure = run_process(
      compile_command(sandbox, jail, {"env", "DTLAB_CCACHE=OFF", "cmake", "-S", source_dir.string(), "-B",
                                      build_dir.string(), "-DDTLAB_SUBMISSION_DIR=" + root.string()}), 600);
  if (configure.exit_code != 0) {
    throw Error("cmake could not configure the submission build in " + build_dir.string() + ":\n" +
                compiler_errors(configure.output));
  }
  for (const auto& e : present) {
    const ProcessResult r = run_process(
        compile_command(sandbox, jail,
                        {"env", "DTLAB_CCACHE=OFF", "cmake", "--build", build_dir.string(), "--target", "submission-" + e}),
        900);
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
