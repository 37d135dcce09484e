// The table of exercises (exercises.txt at the kit's root, compiled in by cmake/exercises.cmake):
// which exist, in what order, whether they run as ranks, and which kind of checks grades them.
#pragma once

#include <string>
#include <vector>

namespace dtlab::grader {

struct Exercise {
  std::string name;    // "task2b"
  std::string launch;  // "single" or "ranks"
  std::string kind;    // "finetune", "sync", "ddp", "traffic"
  std::string title;
  // The rows whose tasks/ folders this one also compiles (exercises.txt's uses=): the mesh
  // composes the student's own pp, tp and zero answers.
  std::vector<std::string> uses;
  bool ranks() const { return launch == "ranks"; }
  // Its folders under tasks/: its own, then those it uses.
  std::vector<std::string> folders() const {
    std::vector<std::string> all = {name};
    all.insert(all.end(), uses.begin(), uses.end());
    return all;
  }
};

// Every exercise, in the order they are taught.
const std::vector<Exercise>& exercises();
std::vector<std::string> exercise_names();
// "task1, task2a, task2b, task3, task4": for help texts and error messages.
std::string exercise_list();
// The row of `name`; a dtlab::Error naming the exercises that exist when there is none.
const Exercise& exercise(const std::string& name);

// The kit's own single-process runs the checks compare with: dtlab-reference (BERT on GLUE) and
// dtlab-gpt2 (GPT-2 on the translation data).
inline constexpr const char* kReference = "reference";
inline constexpr const char* kReferenceGpt2 = "reference-gpt2";

// task1 and the kit's references train in one process, without the launch flags; every exercise
// whose launch is "ranks" is distributed (--master_ip ... --local_rank).
bool single_process(const std::string& exercise);

// Whether a run trains GPT-2 on the translation fixture (dtlab-gpt2, the dp and pipeline kinds) rather
// than BERT on RTE: the two take different flags.
bool trains_gpt2(const std::string& exercise);

}  // namespace dtlab::grader
