// The student release: the kit as students get it, written from this checkout, never copied
// by hand. Every tracked file except the reference solutions, the tests that contain solution
// code (the grader's mutants) and the benchmarks (they time the solutions); tasks/ holds the
// generated skeletons, and README.md is the students' (docs/STUDENTS.md).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace dtlab::grader {

// Paths (relative to the source tree) a release leaves out.
bool left_out_of_release(const std::string& relative_path);

// Writes the release to out (which must not exist or be empty) and returns the files written.
std::vector<std::string> write_release(const std::filesystem::path& source_dir, const std::filesystem::path& out);

}  // namespace dtlab::grader
