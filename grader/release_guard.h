// The guard that keeps answers out of the student release: no file it ships may hold the
// reference code of a TODO. See Note [No answers in the release].
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace dtlab::grader {

// Note [No answers in the release]
// A release ships tasks/ as skeletons, but any other file it ships could still hold a TODO's
// answer: a test's own copy of the loop, a doc's worked example. The guard reads every exercise
// region of solutions/*/*.cpp (Note [Exercise regions], tooling/skeleton.h) and fails when any
// shipped file holds kLeakWindowTokens tokens in a row of one region's body. Tokens, not lines:
// comments are dropped and spacing ignored, so a copy that was reformatted or re-commented is
// still found; the whole body need not be copied, a window of it is enough. Identifiers are kept
// as written: with them replaced by a placeholder, 25-token windows match ordinary kit loops
// (`for (auto& p : model.parameters()) { if (!p.grad()...`), which would make the guard cry wolf.
// String literals are single tokens; block comments are stripped in C++ files only (in a doc,
// "/*" is a glob such as solutions/*/*.cpp, and would hide the text after it).
// A body shorter than the window (one call such as `return state.evaluate();`) is not checked:
// its TODO's own words, which the skeleton ships, already name that call.
// What the guard cannot see is an answer written anew (the fill-drain loop of
// tests/pipeline_test.cpp, say): such files are listed by hand in release.cpp's left-out list.
constexpr size_t kLeakWindowTokens = 25;

struct AnswerLeak {
  std::string file;      // relative to the source folder
  size_t line;           // where the copied window starts
  std::string solution;  // "solutions/pp/schedule.cpp:24", the body's first line
  std::string exercise;  // the TODO's exercise
  std::string excerpt;   // the window's tokens, joined by spaces
};

// The leaks of the files `shipped` (relative to source_dir) against the regions of
// source_dir/solutions; none when there is no solutions/ folder. Files holding a NUL byte
// (binary data) are skipped.
std::vector<AnswerLeak> find_answer_leaks(const std::filesystem::path& source_dir,
                                          const std::vector<std::string>& shipped);

// One line per leak: "FILE:LINE: holds the reference code of TODO(E) (SOLUTION): `...`".
std::string describe(const AnswerLeak& leak);

}  // namespace dtlab::grader
