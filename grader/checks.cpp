// The registry of checks and how one is run, see checks.h.
#include "checks.h"

#include <chrono>

#include "dtlab/core/error.h"

namespace dtlab::grader {

std::vector<CheckSpec> checks_of_kind(const Exercise& e) {
  if (e.kind == "finetune") return finetune_checks(e.name);
  if (e.kind == "sync") return data_parallel_checks(e.name, /*ddp=*/false);
  if (e.kind == "ddp") return data_parallel_checks(e.name, /*ddp=*/true);
  if (e.kind == "traffic") return traffic_checks(e.name);
  throw Error("exercises.txt: " + e.name + " has the kind '" + e.kind + "', which has no checks");
}

const std::vector<CheckSpec>& all_checks() {
  static const std::vector<CheckSpec> checks = [] {
    std::vector<CheckSpec> all;
    for (const Exercise& e : exercises()) {
      for (auto& c : checks_of_kind(e)) all.push_back(std::move(c));
    }
    return all;
  }();
  return checks;
}

std::vector<const CheckSpec*> checks_of(const std::string& exercise) {
  std::vector<const CheckSpec*> out;
  for (const auto& c : all_checks()) {
    if (c.exercise == exercise) out.push_back(&c);
  }
  return out;
}

CheckOutcome run_check(const CheckSpec& check, Runner& runner) {
  const auto start = std::chrono::steady_clock::now();
  CheckOutcome outcome;
  outcome.spec = &check;
  try {
    outcome.verdict = check.run(runner);
  } catch (const std::exception& e) {
    outcome.verdict = {Status::kError, check.name() + ": the grader could not finish this check: " + e.what()};
  }
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return outcome;
}

}  // namespace dtlab::grader
