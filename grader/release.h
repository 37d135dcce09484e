// The student release: the kit as students get it, written from this checkout, never copied
// by hand. Every tracked file except the reference solutions, the tests that contain solution
// code (the grader's mutants, the tests that hold an answer), instructors' notes and the
// benchmarks (they time the solutions); tasks/ holds the generated skeletons, README.md is the
// students' (docs/STUDENTS.md), and release.json names the commit it was made from (Note
// [Release identity], provenance.h). No shipped file may hold a TODO's reference code (Note [No
// answers in the release], release_guard.h).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace dtlab::grader {

// Paths (relative to the source tree) a release leaves out.
bool left_out_of_release(const std::string& relative_path);

// The tracked files of source_dir (a git checkout) that a release ships, relative to it.
std::vector<std::string> release_files(const std::filesystem::path& source_dir);

// Writes the release to out (which must not exist or be empty) and returns the files written.
// Refuses, writing nothing, when tasks/ is stale or a shipped file holds a TODO's answer.
std::vector<std::string> write_release(const std::filesystem::path& source_dir, const std::filesystem::path& out);

}  // namespace dtlab::grader
