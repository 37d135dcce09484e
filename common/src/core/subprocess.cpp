// run_process, see core/subprocess.h.
#include "dtlab/core/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "dtlab/core/error.h"

namespace dtlab {

ProcessResult run_process(const std::vector<std::string>& argv, double timeout_seconds) {
  if (argv.empty()) throw Error("run_process: empty command");
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
  // The child reports a failed exec through this pipe, so "cannot start" is an error here.
  int exec_fds[2];
  if (pipe2(exec_fds, O_CLOEXEC) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));

  const pid_t pid = fork();
  if (pid < 0) throw Error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    const int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, STDIN_FILENO);
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    const int err = errno;
    (void)!write(exec_fds[1], &err, sizeof(err));
    _exit(127);
  }
  setpgid(pid, pid);  // also from the parent, so the group exists before any kill
  close(pipe_fds[1]);
  close(exec_fds[1]);
  int exec_errno = 0;
  const bool exec_failed = read(exec_fds[0], &exec_errno, sizeof(exec_errno)) == sizeof(exec_errno);
  close(exec_fds[0]);
  if (exec_failed) {
    close(pipe_fds[0]);
    waitpid(pid, nullptr, 0);
    throw Error("cannot run " + argv[0] + ": " + std::strerror(exec_errno));
  }

  ProcessResult result;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<long>(timeout_seconds * 1000));
  char buffer[4096];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
    pollfd p{pipe_fds[0], POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<long>(left, 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = read(pipe_fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // every writer closed: the program (and its children) are done
    result.output.append(buffer, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && !result.timed_out) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace dtlab
