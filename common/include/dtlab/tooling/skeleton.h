// Student skeletons are generated from the reference solutions, never kept by hand.
//
// Note [Exercise regions]: in a solution file, an exercise region is
//     <indent>// BEGIN TODO(<exercise>): <what to do, one line>
//     ... the reference code ...
//     <indent>// END TODO
// and the skeleton replaces it with
//     <indent>// TODO(<exercise>): <what to do>
//     <indent>throw dtlab::NotImplemented("TODO(<exercise>): <what to do>");
// so the skeleton compiles and stops at run time with the TODO's own words.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace dtlab {

// Turns the text of one solution file into its skeleton. `source` names the file in errors:
// a region that is not closed, an END without a BEGIN or a nested BEGIN is a dtlab::Error
// "FILE:LINE: ...".
std::string make_skeleton(const std::string& solution_text, const std::string& source);

// Number of exercise regions in a solution file's text.
int count_exercise_regions(const std::string& solution_text);

// One exercise region of a solution file: the reference code a skeleton replaces.
struct ExerciseRegion {
  std::string exercise;  // the <exercise> of its BEGIN TODO
  size_t first_line;     // the line of its first body line, from 1
  std::string body;      // the lines between BEGIN and END, as written
};

// The regions of a solution file's text, in order; the same errors as make_skeleton.
std::vector<ExerciseRegion> exercise_regions(const std::string& solution_text, const std::string& source);

struct SkeletonFile {
  std::filesystem::path solution;  // solutions/T/x.cpp
  std::filesystem::path task;      // tasks/T/x.cpp
  std::string expected;            // what tasks/T/x.cpp must contain
};

// The skeleton of every .cpp and .h file under solutions_dir, mapped to the same relative path
// under tasks_dir.
std::vector<SkeletonFile> plan_skeletons(const std::filesystem::path& solutions_dir,
                                         const std::filesystem::path& tasks_dir);

// Brings tasks_dir up to date with solutions_dir, printing each file it writes; with check,
// writes nothing and prints each stale file. Returns 0, or 1 when check found stale files.
int write_skeletons(const std::filesystem::path& solutions_dir, const std::filesystem::path& tasks_dir,
                    bool check);

}  // namespace dtlab
