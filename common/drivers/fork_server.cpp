// The fork server every rank program links: Note [Ranks forked from one started program]
// (dtlab/tooling/fork_server.h). Inert unless the launcher started this program as one.
//
// It runs as a constructor of priority 102: after every shared library's constructors (LibTorch's
// operator registrations, the expensive part of starting), before the executable's own (the kit's
// and the student's globals, which every rank then builds for itself, as an exec'd one did). glibc
// gives an executable's constructors main's argc, argv and environment; a rank overwrites argv's
// entries with its own (the launcher sends the same count) and returns into the program's start.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dtlab/tooling/fork_server.h"

namespace {

namespace fork_server = dtlab::fork_server;

void send_text(int fd, const std::string& text) {
  (void)!::send(fd, text.data(), text.size(), MSG_NOSIGNAL);
}

// One request: its bytes and the descriptor it carries (-1 without one); false once the launcher
// has closed its end (or the socket fails): the server's work is done.
bool receive(int fd, std::string* bytes, int* carried) {
  bytes->assign(fork_server::kMaxRequestBytes, '\0');
  iovec io{bytes->data(), bytes->size()};
  fork_server::OneDescriptor control;
  msghdr message = fork_server::message_of(&io, &control);
  ssize_t n;
  do {
    n = ::recvmsg(fd, &message, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  bytes->resize(static_cast<size_t>(n));
  *carried = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&message); c; c = CMSG_NXTHDR(&message, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(carried, CMSG_DATA(c), sizeof(int));
  }
  return true;
}

std::vector<std::string> split_nul(const std::string& bytes) {
  std::vector<std::string> parts;
  size_t from = 0;
  for (size_t at = bytes.find('\0'); at != std::string::npos; at = bytes.find('\0', from)) {
    parts.push_back(bytes.substr(from, at - from));
    from = at + 1;
  }
  if (from < bytes.size()) parts.push_back(bytes.substr(from));
  return parts;
}

// In the rank's own process: its group, its output, its arguments; then back to the program's
// start. The strings are the rank's for its whole life (argv's are the server's, which it keeps).
void become_rank(char** argv, const std::vector<std::string>& args, int server_fd, int log_fd) {
  ::setpgid(0, 0);  // its own group: the launcher's kill of the group reaches all it starts
  ::close(server_fd);
  const int in = ::open("/dev/null", O_RDONLY);
  if (in >= 0) ::dup2(in, STDIN_FILENO);
  if (in > STDERR_FILENO) ::close(in);
  ::dup2(log_fd, STDOUT_FILENO);
  ::dup2(log_fd, STDERR_FILENO);
  if (log_fd > STDERR_FILENO) ::close(log_fd);
  for (size_t i = 0; i < args.size(); ++i) argv[i] = ::strdup(args[i].c_str());
}

// Forks a rank through a middle process that exits at once, so the rank is re-parented to the
// launcher (its child subreaper), which waits for it. Returns the rank's pid in the server, or
// -errno; returns 0 in the rank itself.
pid_t fork_rank(char** argv, const std::vector<std::string>& args, int server_fd, int log_fd) {
  int pid_pipe[2];
  if (::pipe2(pid_pipe, O_CLOEXEC) != 0) return -errno;
  const pid_t middle = ::fork();
  if (middle < 0) {
    const int err = errno;
    ::close(pid_pipe[0]);
    ::close(pid_pipe[1]);
    return -err;
  }
  if (middle == 0) {
    const pid_t self = ::getpid();
    const pid_t rank = ::fork();
    if (rank == 0) {
      ::close(pid_pipe[0]);
      ::close(pid_pipe[1]);
      become_rank(argv, args, server_fd, log_fd);
      // A rank's parent is the launcher from its first line, as an exec'd rank's is: it goes on
      // once the middle process has exited and the kernel has re-parented it (microseconds; a
      // bound, so that a launcher that is no subreaper cannot hold it).
      for (int i = 0; i < 20000 && ::getppid() == self; ++i) ::usleep(100);
      return 0;
    }
    // Also from the parent, so the group exists before the launcher can signal it.
    if (rank > 0) ::setpgid(rank, rank);
    const int answer = rank > 0 ? rank : -errno;
    (void)!::write(pid_pipe[1], &answer, sizeof answer);
    ::_exit(0);
  }
  ::close(pid_pipe[1]);
  int answer = -EPIPE;
  ssize_t n;
  do {
    n = ::read(pid_pipe[0], &answer, sizeof answer);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof answer)) answer = -EPIPE;
  ::close(pid_pipe[0]);
  while (::waitpid(middle, nullptr, 0) < 0 && errno == EINTR) {
  }
  return answer;
}

// The server's loop; returns only in a rank. A server is never a rank itself: it _exits.
// 102: after the CUDA half's loader (101, Note [The CUDA half where a GPU is], core/cuda_half.h),
// so that where a GPU is the ranks inherit its load too.
__attribute__((constructor(102))) void serve_ranks_if_asked(int argc, char** argv, char** /*environment*/) {
  const char* value = std::getenv(fork_server::kEnvironment);
  if (!value) return;
  const std::string setting = value;
  const std::string prefix = std::string(fork_server::kMarker) + ":";
  char* end = nullptr;
  const long fd = setting.rfind(prefix, 0) == 0 ? std::strtol(setting.c_str() + prefix.size(), &end, 10) : -1;
  if (fd < 0 || !end || *end != '\0') {
    std::fprintf(stderr, "%s=%s: expected %s<descriptor> (set by the kit's launcher)\n", fork_server::kEnvironment,
                 value, prefix.c_str());
    ::_exit(2);
  }
  ::unsetenv(fork_server::kEnvironment);  // the ranks are not servers
  const int server_fd = static_cast<int>(fd);
  ::fcntl(server_fd, F_SETFD, FD_CLOEXEC);
  send_text(server_fd, "ready");
  std::string request;
  int log_fd = -1;
  while (receive(server_fd, &request, &log_fd)) {
    const std::vector<std::string> args = split_nul(request);
    std::string error;
    if (static_cast<int>(args.size()) != argc) {
      error = "error: the rank's command has " + std::to_string(args.size()) + " words, the server's " +
              std::to_string(argc) + " (every rank of a run takes the same flags)";
    } else if (log_fd < 0) {
      error = "error: the request carried no log";
    }
    if (!error.empty()) {
      if (log_fd >= 0) ::close(log_fd);
      send_text(server_fd, error);
      continue;
    }
    const pid_t pid = fork_rank(argv, args, server_fd, log_fd);
    if (pid == 0) return;  // the rank: on to the executable's constructors and main
    ::close(log_fd);
    send_text(server_fd, pid > 0 ? std::to_string(pid) : "error: fork: " + std::string(std::strerror(-pid)));
  }
  ::_exit(0);
}

}  // namespace
