// The grade as Gradescope's autograder reads it (results.json: score, max_score, tests with
// name/score/max_score/status/output) and as a person reads it (a table on the terminal).
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <vector>

#include "checks.h"

namespace dtlab::grader {

nlohmann::json gradescope_json(const std::vector<CheckOutcome>& outcomes, const nlohmann::json& provenance,
                               double seconds);

// Writes path atomically.
void write_gradescope(const std::filesystem::path& path, const nlohmann::json& results);

// One line per check (name, points, status, what must hold), then each failure's whole
// message, then the total and where the numbers come from (the provenance).
std::string format_table(const std::vector<CheckOutcome>& outcomes, const nlohmann::json& provenance);

// "commit f39992d (dirty), LibTorch 1.13.0 gloo, seed 42, vm (2 cores, AMD EPYC), 2026-11-22T13:10:00Z"
std::string describe_provenance(const nlohmann::json& provenance);

}  // namespace dtlab::grader
