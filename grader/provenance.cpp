// Collecting provenance, see provenance.h.
#include "provenance.h"

#include <fmt/format.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <fstream>
#include <thread>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/io/file.h"
#include "dtlab/io/json_file.h"
#include "dtlab/tooling/process.h"
#include "dtlab/train/runtime.h"

namespace fs = std::filesystem;

namespace dtlab::grader {
namespace {

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return trimmed(line.substr(colon + 2));
    }
  }
  return "unknown CPU";
}

}  // namespace

GitState git_state(const fs::path& source_dir) {
  GitState state;
  try {
    const ProcessResult head = run_process({"git", "-C", source_dir.string(), "rev-parse", "HEAD"}, 10);
    const ProcessResult brief = run_process({"git", "-C", source_dir.string(), "rev-parse", "--short", "HEAD"}, 10);
    if (head.exit_code != 0 || brief.exit_code != 0) return state;
    state.known = true;
    state.commit = trimmed(head.output);
    state.short_commit = trimmed(brief.output);
    const ProcessResult status =
        run_process({"git", "-C", source_dir.string(), "status", "--porcelain", "--untracked-files=no"}, 10);
    state.dirty = status.exit_code == 0 && !trimmed(status.output).empty();
  } catch (const std::exception&) {
    // no git on this machine: the commit stays unknown, and says so
  }
  return state;
}


nlohmann::json sources_identity(const fs::path& folder) {
  if (!fs::is_directory(folder)) throw Error("the graded sources " + folder.string() + " are not a folder");
  ContentHash hash;
  const size_t files = hash.add_tree(folder);
  return {{"folder", folder.string()}, {"files", files}, {"fnv1a64", hash.hex()}};
}

nlohmann::json collect_provenance(const fs::path& source_dir, const std::string& submission,
                                  const std::string& backend, const fs::path& sources) {
  const GitState git = git_state(source_dir);
  std::string commit = git.known ? git.short_commit : "unknown";
  bool dirty = git.dirty;
  nlohmann::json release;
  if (fs::is_regular_file(source_dir / kReleaseIdentityFile)) {
    release = io::read_json_file(source_dir / kReleaseIdentityFile);
    if (!git.known) {
      commit = release.value("kit_commit_short", "unknown") + " (release)";
      dirty = release.value("kit_dirty", false);
    }
  }
  char date[32] = {0};
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  nlohmann::json p = {{"commit", commit}, {"dirty", dirty}, {"libtorch", TORCH_VERSION}, {"backend", backend},
                      {"hostname", train::host_name()}, {"cpu", cpu_model()},
                      {"cores", static_cast<int>(std::thread::hardware_concurrency())}, {"date", date}, {"seed", 42},
                      {"submission", submission}};
  if (!release.is_null()) p["release"] = release;
  if (!sources.empty()) p["sources"] = sources_identity(sources);
  return p;
}

}  // namespace dtlab::grader
