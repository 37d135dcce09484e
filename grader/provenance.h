// Where a grading's numbers come from: commit, LibTorch and backend, machine, seed. Every
// results.json, figure and table of the report carries it.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

namespace dtlab::grader {

// {"commit", "dirty", "libtorch", "backend", "hostname", "cpu", "cores", "date", "seed",
//  "submission"}; the commit is `git describe` of source_dir ("unknown" outside a git tree).
nlohmann::json collect_provenance(const std::filesystem::path& source_dir, const std::string& submission,
                                  const std::string& backend);

}  // namespace dtlab::grader
