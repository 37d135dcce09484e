// The launcher's side of Note [Ranks forked from one started program]
// (dtlab/tooling/fork_server.h): a run's program started once, and its ranks forked from it.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace dtlab::grader {

// Whether the program links the kit's fork server (its bytes hold the marker).
bool links_fork_server(const std::filesystem::path& binary);

// False when DTLAB_EXEC_RANKS=1 asks for every rank to be exec'd (to compare, or to rule the
// server out when something looks wrong).
bool fork_ranks_by_default();

class ForkServer {
 public:
  // Starts argv (a rank's command: every rank's has as many words) as a fork server in its own
  // process group, its own output to `log`, and waits up to start_seconds for it to say it is
  // ready. Makes this process a child subreaper, so the ranks become its children. Throws
  // dtlab::Error naming what went wrong (the server's output is in `log`).
  ForkServer(const std::vector<std::string>& argv, const std::filesystem::path& log, double start_seconds);
  // Ends the server (the ranks it forked go on); removes its log if it said nothing.
  ~ForkServer();
  ForkServer(const ForkServer&) = delete;
  ForkServer& operator=(const ForkServer&) = delete;

  // A rank with argv, in its own process group, stdin from /dev/null, stdout and stderr to
  // output_fd (the caller keeps its copy): a child of this process. Throws dtlab::Error.
  pid_t fork_rank(const std::vector<std::string>& argv, int output_fd);

 private:
  // The server's next message, "" when none came within `seconds`, or how it ended.
  std::string answer(double seconds);
  // How the server ended, if it did within `seconds`; "" if it still runs.
  std::string ended(double seconds);
  int socket_ = -1;
  pid_t pid_ = -1;
  std::filesystem::path log_;
};

}  // namespace dtlab::grader
