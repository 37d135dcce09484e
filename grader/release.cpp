// Writing the student release, see release.h.
#include "release.h"

#include <nlohmann/json.hpp>

#include <ctime>
#include <sstream>

#include "dtlab/core/error.h"
#include "dtlab/io/file.h"
#include "dtlab/io/json_file.h"
#include "dtlab/tooling/process.h"
#include "dtlab/tooling/skeleton.h"
#include "provenance.h"
#include "release_guard.h"

namespace fs = std::filesystem;

namespace dtlab::grader {

// The release's README.md is written from this file: the students' commands, not the instructors'.
constexpr const char* kStudentReadme = "docs/STUDENTS.md";

bool left_out_of_release(const std::string& path) {
  // The reference solutions, the grader's mutants and the benchmarks (they time the solutions);
  // the kit's own CI (.ci/run: it runs the instructors' README);
  // instructors' notes (docs/instructors/: the mistakes the grader catches, with its messages,
  // answer the handouts' report questions); and the tests that hold an answer written anew, which
  // Note [No answers in the release] cannot see: fill_drain.h is clock_cycles, pipeline_test's
  // and gpu_test's loops over it are Pipe::compute, forward and backward, pp_schedule_test's
  // one_f_one_b_with_warmup is the 1F1B builder, pp_protocol_test's plain_loop is a run_stage, and
  // stage_lists.h writes GPipe's and 1F1B's lists (the simulator's suite, stage_simulate_test, runs
  // them); tp_test lists each rank's columns of GPT-2's fused c_attn and writes the vocabulary-
  // parallel loss's recipe out to name its classic mistake. Each compiles only beside solutions/
  // (tests/CMakeLists.txt).
  // cp's suites (cp_attention_test, cp_ring_test) link the reference and compile only beside it.
  // mesh_train_test holds the mesh's trainer to one process with the reference linked in;
  // precision_test holds the checkpointed block, the masters and the loss scaler with it.
  // Writing a release is the instructors' (grader/CMakeLists.txt builds it beside solutions/ only).
  for (const char* prefix : {"tests/cp_", "tests/mesh_train_test.cpp",
                             "solutions/", "tests/mutants/", "tests/grader_mutants_test.cpp", "bench/", kStudentReadme, ".ci/",
                             "grader/release.cpp", "grader/release.h", "grader/release_guard.cpp",
                             "grader/release_guard.h", "tests/release_test.cpp",
                             "docs/instructors/", "tests/fill_drain.h", "tests/pipeline_test.cpp",
                             "tests/gpu_test.cpp", "tests/pp_schedule_test.cpp", "tests/pp_protocol_test.cpp",
                             "tests/stage_lists.h", "tests/stage_simulate_test.cpp", "tests/tp_test.cpp",
                             "tests/precision_test.cpp"}) {
    if (path.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

std::vector<std::string> release_files(const fs::path& source_dir) {
  // The tracked files: what a clone has, never build outputs or local scratch.
  const ProcessResult files = run_process({"git", "-C", source_dir.string(), "ls-files", "-z"}, 60);
  if (files.exit_code != 0) {
    throw Error("grader release lists the files of a git checkout, and `git ls-files` failed in " +
                source_dir.string() + ":\n" + files.output);
  }
  std::vector<std::string> shipped;
  std::istringstream in(files.output);
  for (std::string path; std::getline(in, path, '\0');) {
    if (path.empty() || left_out_of_release(path)) continue;
    if (!fs::is_regular_file(source_dir / path)) continue;  // deleted but not yet committed
    shipped.push_back(path);
  }
  return shipped;
}

std::vector<std::string> write_release(const fs::path& source_dir, const fs::path& out) {
  if (fs::exists(out) && !(fs::is_directory(out) && fs::is_empty(out))) {
    throw Error("--out " + out.string() + " exists and is not empty: give a new folder");
  }
  // The skeletons must be the generated ones, or the release would ship stale TODOs.
  for (const SkeletonFile& f : plan_skeletons(source_dir / "solutions", source_dir / "tasks")) {
    if (!fs::exists(f.task) || io::read_file(f.task) != f.expected) {
      throw Error(f.task.string() + " is not what solutions/ generates: run `make skeletons` first");
    }
  }
  const std::vector<std::string> shipped = release_files(source_dir);
  // The README is written from docs/STUDENTS.md: check what is shipped, not what it replaces.
  std::vector<std::string> read_from;
  for (const std::string& path : shipped) read_from.push_back(path == "README.md" ? kStudentReadme : path);
  const std::vector<AnswerLeak> leaks = find_answer_leaks(source_dir, read_from);
  if (!leaks.empty()) {
    std::string lines;
    for (const AnswerLeak& leak : leaks) lines += "  " + describe(leak) + "\n";
    throw Error("the release would ship the answers of TODOs (Note [No answers in the release], "
                "grader/release_guard.h):\n" + lines +
                "move that code out of those files, or leave the files out (left_out_of_release, grader/release.cpp)");
  }
  const GitState kit = git_state(source_dir);
  if (!kit.known) throw Error("grader release: " + source_dir.string() + " has no commit (`git rev-parse HEAD` failed)");
  std::vector<std::string> written;
  for (size_t k = 0; k < shipped.size(); ++k) {
    const fs::path from = source_dir / read_from[k], to = out / shipped[k];
    fs::create_directories(to.parent_path());
    io::write_file_atomically(to, io::read_file(from));
    fs::permissions(to, fs::status(from).permissions());
    written.push_back(shipped[k]);
  }
  // Note [Release identity] (provenance.h): what a grade in the release names instead of a commit.
  char date[32] = {0};
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  io::write_json_file(out / kReleaseIdentityFile, {{"kit_commit", kit.commit}, {"kit_commit_short", kit.short_commit},
                                                   {"kit_dirty", kit.dirty}, {"made", date}});
  written.push_back(kReleaseIdentityFile);
  return written;
}

}  // namespace dtlab::grader
