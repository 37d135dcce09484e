// Where the kit is and which binaries an exercise has, see commands.h.
#include <algorithm>

#include "checks.h"
#include "commands.h"
#include "dtlab/core/error.h"
#include "dtlab/tooling/build_paths.h"
#include "dtlab/tooling/process.h"

namespace fs = std::filesystem;

namespace dtlab::grader {

const fs::path kSourceDir = build_paths::source_dir;
const fs::path kBuildDir = build_paths::binary_dir;

bool has_solutions() { return fs::is_directory(kSourceDir / "solutions"); }

fs::path exercise_binary(const std::string& exercise, bool solutions) {
  return kBuildDir / (solutions ? exercise + "-solution" : exercise);
}

fs::path ensure_fixtures() {
  const fs::path fixtures = kSourceDir / "fixtures";
  if (fs::exists(fixtures / "bert-tiny" / "config.json") && fs::exists(fixtures / "RTE" / "train.tsv") &&
      fs::exists(fixtures / "gpt2-tiny" / "config.json") && fs::exists(fixtures / "translation" / "train.jsonl")) {
    return fixtures;
  }
  const ProcessResult r = run_process({(kBuildDir / "tools" / "dtlab-fixtures").string(), "--out", fixtures.string()}, 300);
  if (r.exit_code != 0) throw Error("dtlab-fixtures could not write " + fixtures.string() + ":\n" + r.output);
  return fixtures;
}

std::vector<std::string> selected_exercises(const std::string& which) {
  if (which == "all") return exercise_names();
  std::vector<std::string> wanted;
  for (size_t start = 0; start <= which.size();) {
    const size_t comma = std::min(which.find(',', start), which.size());
    const std::string name = which.substr(start, comma - start);
    wanted.push_back(exercise(name).name);  // an unknown name is an error listing the table
    start = comma + 1;
  }
  std::vector<std::string> ordered;
  for (const auto& e : exercise_names()) {
    if (std::find(wanted.begin(), wanted.end(), e) != wanted.end()) ordered.push_back(e);
  }
  return ordered;
}

}  // namespace dtlab::grader
