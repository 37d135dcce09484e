// A run's ranks forked from one started program, see fork_ranks.h.
#include "fork_ranks.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "dtlab/core/error.h"
#include "dtlab/tooling/fork_server.h"

namespace fs = std::filesystem;

namespace dtlab::grader {
namespace {

std::string errno_text() { return std::strerror(errno); }

// An answer's wait: a fork is milliseconds; the server's start is the program's load.
constexpr double kForkAnswerSeconds = 60;

}  // namespace

bool links_fork_server(const fs::path& binary) {
  std::ifstream in(binary, std::ios::binary);
  if (!in) return false;
  const std::string marker = fork_server::kMarker;
  // Read in blocks that overlap by the marker's length, so one split between blocks is found.
  std::string block(1 << 20, '\0');
  std::string carry;
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    const std::string text = carry + block.substr(0, static_cast<size_t>(in.gcount()));
    if (text.find(marker) != std::string::npos) return true;
    carry = text.size() >= marker.size() ? text.substr(text.size() - marker.size() + 1) : text;
  }
  return false;
}

bool fork_ranks_by_default() {
  const char* exec_ranks = std::getenv("DTLAB_EXEC_RANKS");
  return !(exec_ranks && std::string(exec_ranks) == "1");
}

ForkServer::ForkServer(const std::vector<std::string>& argv, const fs::path& log, double start_seconds) : log_(log) {
  if (argv.empty()) throw Error("fork server: empty command");
  // Orphans below this process (a rank once its middle process exits) come to it, not to init.
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) throw Error("prctl(PR_SET_CHILD_SUBREAPER): " + errno_text());
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) throw Error("socketpair: " + errno_text());
  const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error("cannot write " + log.string() + ": " + errno_text());
  }
  // Everything the child needs, made before the fork (after it, only async-signal-safe calls).
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::string setting = std::string(fork_server::kEnvironment) + "=" + fork_server::kMarker + ":" +
                              std::to_string(fds[1]);
  std::vector<char*> environment;
  const std::string name = std::string(fork_server::kEnvironment) + "=";
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, name.c_str(), name.size()) != 0) environment.push_back(*e);
  }
  environment.push_back(const_cast<char*>(setting.c_str()));
  environment.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const std::string why = errno_text();
    ::close(fds[0]);
    ::close(fds[1]);
    ::close(out);
    throw Error("fork: " + why);
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    const int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, STDIN_FILENO);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(out, STDERR_FILENO);
    ::fcntl(fds[1], F_SETFD, 0);  // the server's end stays open across the exec
    ::execve(args[0], args.data(), environment.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  pid_ = pid;
  ::close(fds[1]);
  ::close(out);
  socket_ = fds[0];
  const std::string said = answer(start_seconds);
  if (said != "ready") {
    // No destructor runs for a constructor that throws: end the server here.
    ::close(socket_);
    socket_ = -1;
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
      }
      pid_ = -1;
    }
    std::ifstream in(log);
    std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (output.size() > 2000) output = output.substr(output.size() - 2000);
    throw Error("the fork server " + argv[0] + " did not start (" + (said.empty() ? "no answer" : said) + ")" +
                (output.empty() ? "" : ": " + output));
  }
}

ForkServer::~ForkServer() {
  if (socket_ >= 0) ::close(socket_);
  if (pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  std::error_code ec;
  if (fs::exists(log_, ec) && fs::file_size(log_, ec) == 0) fs::remove(log_, ec);
}

std::string ForkServer::ended(double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    int status = 0;
    if (pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? "it exited with status " + std::to_string(WEXITSTATUS(status))
                               : "it was killed by signal " + std::to_string(WTERMSIG(status));
    }
    if (std::chrono::steady_clock::now() >= deadline) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string ForkServer::answer(double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return "";
    pollfd p{socket_, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min(left, 1.0) * 1000) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return "";
    if (ready == 0) {
      // A server that died (or exec'd nothing) answers no more: no need to wait out the deadline.
      const std::string how = ended(0);
      if (!how.empty()) return how;
      continue;
    }
    std::string text(256, '\0');
    const ssize_t n = ::recv(socket_, text.data(), text.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // its end closed: it is ending, or has
      const std::string how = ended(2);
      return how.empty() ? "it closed its end of the socket" : how;
    }
    text.resize(static_cast<size_t>(n));
    return text;
  }
}

pid_t ForkServer::fork_rank(const std::vector<std::string>& argv, int output_fd) {
  std::string request;
  for (const auto& a : argv) request += a + std::string(1, '\0');
  if (request.size() > static_cast<size_t>(fork_server::kMaxRequestBytes)) {
    throw Error("a rank's command of " + std::to_string(request.size()) + " bytes is more than the fork server takes");
  }
  iovec io{request.data(), request.size()};
  fork_server::OneDescriptor control;
  msghdr message = fork_server::message_of(&io, &control);
  cmsghdr* c = CMSG_FIRSTHDR(&message);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &output_fd, sizeof(int));
  ssize_t sent;
  do {
    sent = ::sendmsg(socket_, &message, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent != static_cast<ssize_t>(request.size())) throw Error("the fork server took no request: " + errno_text());
  const std::string said = answer(kForkAnswerSeconds);
  char* end = nullptr;
  const long pid = said.empty() ? -1 : std::strtol(said.c_str(), &end, 10);
  if (pid <= 0 || *end != '\0') {
    throw Error("the fork server of " + argv.front() + " did not fork a rank: " + (said.empty() ? "no answer" : said));
  }
  return static_cast<pid_t>(pid);
}

}  // namespace dtlab::grader
