// The grader's subcommands, each in its own file; main.cpp parses the flags into these.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace dtlab::grader {

struct CheckFlags {
  std::string which;
  std::string submission;
  bool solutions = false;
  std::vector<std::string> use_binaries;  // T=PATH
  std::vector<std::string> only;          // check ids; empty: every check
  std::string results = "out/grade";      // with --only: its kPartialFolder (Note [Partial gradings])
  int timing_iterations = 40;  // docs/DESIGN.md: 40 iterations, the first discarded
  double timeout = 30, run_timeout = 300;
  int threads = 0;
  std::string backend = "gloo";  // --backend of every rank: gloo, or nccl (a GPU per rank)
  std::string sandbox = "auto";  // Note [The sandbox]: auto, bwrap, user or none
  bool keep_runs = false;        // keep every file of the runs, not only what feedback and report read
  std::string reference_cache;   // Note [A reference run made once]; empty: DTLAB_REFERENCE_CACHE, if set
};

struct RunFlags {
  std::string exercise;
  int world = 4;
  std::string hosts;
  bool solutions = false;
  bool print_commands = false;
  int port = 29500;
  std::string out = "out/run";
  double run_timeout = 3600;
  std::vector<std::string> extra;
};

// Note [Partial gradings]: a grading with --only runs some checks; written over RESULTS/results.json
// it would replace the last full grading (the record a student or a report reads) with a few lines,
// and its runs would replace the full grading's. So it writes RESULTS/only/ instead (results.json,
// runs/) and leaves the rest of RESULTS as it was. A grading of some exercises without --only
// (`make check-task2b`) is a grading of those exercises and writes RESULTS itself.
inline constexpr const char* kPartialFolder = "only";

int list_command();                       // list_command.cpp
int check_command(const CheckFlags& f);   // check_command.cpp
int run_command(const RunFlags& f);       // run_command.cpp

// Where this build's kit is (kit.cpp): the source tree and the build tree it was built from.
extern const std::filesystem::path kSourceDir;
extern const std::filesystem::path kBuildDir;
bool has_solutions();
std::filesystem::path exercise_binary(const std::string& exercise, bool solutions);
std::filesystem::path ensure_fixtures();  // the offline fixture, made once by dtlab-fixtures
// "all", one exercise, or several separated by commas, in the order they are taught.
std::vector<std::string> selected_exercises(const std::string& which);

}  // namespace dtlab::grader
