// Starting other programs, for the kit's tooling (the grader, the tests, the benchmarks; never a
// student binary): a child in its own process group with stdin from /dev/null, so that a
// deadline can kill it and everything it started; a program run to completion with its output
// captured and a time limit; a free local port for a run's rendezvous.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace dtlab {

// Starts argv[0] (searched on PATH) with argv in a new process group (its pid), stdin from
// /dev/null, stdout and stderr to output_fd (the caller closes its copy afterwards). Throws
// dtlab::Error naming the program when it cannot be started (the exec's own error is reported
// back through a pipe, so a missing binary is an error here, not an exit code later).
pid_t spawn_process(const std::vector<std::string>& argv, int output_fd);

struct ProcessResult {
  int exit_code = -1;     // the program's exit status; -1 when killed by a signal or timed out
  int signal = 0;         // the signal that ended it, if any
  bool timed_out = false;
  std::string output;     // stdout and stderr, interleaved as written
};

// Runs argv to completion with spawn_process. After timeout_seconds the whole group is killed
// (SIGKILL) and timed_out is set. Throws dtlab::Error when the program cannot be started.
ProcessResult run_process(const std::vector<std::string>& argv, double timeout_seconds);

// A TCP port on 127.0.0.1 that nobody listens on right now: the kernel picks it (bind to port
// 0), we read it back and close the socket. The kernel hands out ephemeral ports round-robin,
// so it is not given out again soon after; a run that loses the race sees "address in use".
int free_local_port();

}  // namespace dtlab
