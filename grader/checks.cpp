// The registry of checks and how one is run, see checks.h.
#include "checks.h"

#include <chrono>

#include "dtlab/core/error.h"

namespace dtlab::grader {

const std::vector<std::string>& exercise_names() {
  static const std::vector<std::string> names = {"task1", "task2a", "task2b", "task3", "task4"};
  return names;
}

const std::vector<CheckSpec>& all_checks() {
  static const std::vector<CheckSpec> checks = [] {
    std::vector<CheckSpec> all = task1_checks();
    for (const char* t : {"task2a", "task2b", "task3"}) {
      for (auto& c : data_parallel_checks(t)) all.push_back(std::move(c));
    }
    for (auto& c : task4_checks()) all.push_back(std::move(c));
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
