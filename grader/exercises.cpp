// The table of exercises, see exercises.h.
#include "exercises.h"

#include "dtlab/core/error.h"

namespace dtlab::grader {

const std::vector<Exercise>& exercises() {
  static const std::vector<Exercise> table = {
#include "exercise_table.inc"
  };
  return table;
}

std::vector<std::string> exercise_names() {
  std::vector<std::string> names;
  for (const auto& e : exercises()) names.push_back(e.name);
  return names;
}

std::string exercise_list() {
  std::string list;
  for (const auto& e : exercises()) list += (list.empty() ? "" : ", ") + e.name;
  return list;
}

const Exercise& exercise(const std::string& name) {
  for (const auto& e : exercises()) {
    if (e.name == name) return e;
  }
  throw Error("no exercise '" + name + "': choose " + exercise_list() + " (commas for several), or all");
}

bool single_process(const std::string& name) {
  return name == kReference || name == kReferenceGpt2 || !exercise(name).ranks();
}

bool trains_gpt2(const std::string& name) {
  return name == kReferenceGpt2 || (name != kReference && (exercise(name).kind == "dp" || exercise(name).kind == "pipeline" ||
                                                   exercise(name).kind == "pp" || exercise(name).kind == "zero" ||
                                                   exercise(name).kind == "tp" || exercise(name).kind == "cp" ||
                                                   exercise(name).kind == "mesh" || exercise(name).kind == "precision"));
}

}  // namespace dtlab::grader
