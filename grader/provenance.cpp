// Collecting provenance, see provenance.h.
#include "provenance.h"

#include <torch/version.h>

#include <ctime>
#include <fstream>
#include <thread>

#include "dtlab/tooling/process.h"
#include "dtlab/train/runtime.h"

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

nlohmann::json collect_provenance(const std::filesystem::path& source_dir, const std::string& submission,
                                  const std::string& backend) {
  std::string commit = "unknown";
  bool dirty = false;
  try {
    const ProcessResult head = run_process({"git", "-C", source_dir.string(), "rev-parse", "--short", "HEAD"}, 10);
    if (head.exit_code == 0) {
      commit = trimmed(head.output);
      const ProcessResult status =
          run_process({"git", "-C", source_dir.string(), "status", "--porcelain", "--untracked-files=no"}, 10);
      dirty = status.exit_code == 0 && !trimmed(status.output).empty();
    }
  } catch (const std::exception&) {
    // no git on this machine: the commit stays unknown, and says so
  }
  char date[32] = {0};
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return {{"commit", commit}, {"dirty", dirty}, {"libtorch", TORCH_VERSION}, {"backend", backend},
          {"hostname", train::host_name()}, {"cpu", cpu_model()},
          {"cores", static_cast<int>(std::thread::hardware_concurrency())}, {"date", date}, {"seed", 42},
          {"submission", submission}};
}

}  // namespace dtlab::grader
