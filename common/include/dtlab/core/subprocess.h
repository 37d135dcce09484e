// Running another program with a time limit and its output captured: used by the tests (and the
// grader) to run exercise binaries the way a person would, without ever hanging.
#pragma once

#include <string>
#include <vector>

namespace dtlab {

struct ProcessResult {
  int exit_code = -1;     // the program's exit status; -1 when killed by a signal or timed out
  int signal = 0;         // the signal that ended it, if any
  bool timed_out = false;
  std::string output;     // stdout and stderr, interleaved as written
};

// Runs argv[0] (searched on PATH) with argv, stdin from /dev/null, in its own process group.
// After timeout_seconds the whole group is killed (SIGKILL) and timed_out is set. Throws
// dtlab::Error when the program cannot be started.
ProcessResult run_process(const std::vector<std::string>& argv, double timeout_seconds);

}  // namespace dtlab
