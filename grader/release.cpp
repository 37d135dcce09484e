// Writing the student release, see release.h.
#include "release.h"

#include <sstream>

#include "dtlab/core/error.h"
#include "dtlab/tooling/skeleton.h"
#include "dtlab/tooling/process.h"
#include "dtlab/io/file.h"

namespace fs = std::filesystem;

namespace dtlab::grader {

// The release's README.md is written from this file: the students' commands, not the instructors'.
constexpr const char* kStudentReadme = "docs/STUDENTS.md";

bool left_out_of_release(const std::string& path) {
  for (const char* prefix : {"solutions/", "tests/mutants/", "tests/grader_mutants_test.cpp", "bench/", kStudentReadme}) {
    if (path.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

std::vector<std::string> write_release(const fs::path& source_dir, const fs::path& out) {
  if (fs::exists(out) && !(fs::is_directory(out) && fs::is_empty(out))) {
    throw Error("--out " + out.string() + " exists and is not empty: give a new folder");
  }
  // The tracked files: what a clone has, never build outputs or local scratch.
  const ProcessResult files = run_process({"git", "-C", source_dir.string(), "ls-files", "-z"}, 60);
  if (files.exit_code != 0) {
    throw Error("grader release lists the files of a git checkout, and `git ls-files` failed in " +
                source_dir.string() + ":\n" + files.output);
  }
  // The skeletons must be the generated ones, or the release would ship stale TODOs.
  for (const SkeletonFile& f : plan_skeletons(source_dir / "solutions", source_dir / "tasks")) {
    if (!fs::exists(f.task) || io::read_file(f.task) != f.expected) {
      throw Error(f.task.string() + " is not what solutions/ generates: run `make skeletons` first");
    }
  }
  std::vector<std::string> written;
  std::istringstream in(files.output);
  for (std::string path; std::getline(in, path, '\0');) {
    if (path.empty() || left_out_of_release(path)) continue;
    const fs::path from = source_dir / (path == "README.md" ? kStudentReadme : path), to = out / path;
    if (!fs::is_regular_file(from)) continue;  // deleted but not yet committed
    fs::create_directories(to.parent_path());
    io::write_file_atomically(to, io::read_file(from));
    fs::permissions(to, fs::status(from).permissions());
    written.push_back(path);
  }
  return written;
}

}  // namespace dtlab::grader
