// Helpers of the end-to-end suites that run several ranks of a task binary as separate
// processes, the way a student starts them in several terminals: a free port per test, ranks
// started in parallel with their output in per-rank files, and waits that never hang.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "dtlab/tooling/process.h"

namespace dtlab::test {

// Each test asks for its own port (tooling/process.h), so tests running at the same time
// (ctest -j, other people's runs) do not collide.
inline int free_port() { return dtlab::free_local_port(); }

// A socket listening on 127.0.0.1:port for as long as it lives (to occupy a port). The port is
// the kernel's choice when 0 is given.
class ListeningSocket {
 public:
  explicit ListeningSocket(int port = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 4) != 0) {
      const int err = errno;
      ::close(fd_);
      throw std::runtime_error(std::string("bind/listen: ") + std::strerror(err));
    }
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~ListeningSocket() { ::close(fd_); }
  ListeningSocket(const ListeningSocket&) = delete;
  ListeningSocket& operator=(const ListeningSocket&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

inline std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// How one child process ended.
struct ChildExit {
  int exit_code = -1;      // its exit status; -1 when a signal ended it or it timed out
  int signal = 0;          // the signal that ended it, if any
  bool timed_out = false;  // we killed it at the deadline
  double seconds = 0;      // from start to exit
  std::string output;      // its stdout and stderr (the log file)

  std::string describe() const {
    std::ostringstream s;
    if (timed_out) {
      s << "timed out after " << seconds << " s";
    } else if (signal) {
      s << "killed by signal " << signal << " after " << seconds << " s";
    } else {
      s << "exit " << exit_code << " after " << seconds << " s";
    }
    return s.str() + "; output:\n" + output;
  }
};

// A program running in the background, in its own process group, with stdin from /dev/null
// and stdout and stderr appended to a log file. The destructor kills (SIGKILL) and reaps it if
// it is still running, so a failed assertion never leaves a rank behind.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::filesystem::path& log) : log_(log) {
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out < 0) throw std::runtime_error("cannot write " + log.string() + ": " + std::strerror(errno));
    start_ = std::chrono::steady_clock::now();
    try {
      pid_ = dtlab::spawn_process(argv, out);
    } catch (...) {
      ::close(out);
      throw;
    }
    ::close(out);
  }
  ~Child() {
    if (running()) {
      kill(SIGKILL);
      wait_until(std::chrono::steady_clock::now() + std::chrono::seconds(10));
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  const std::filesystem::path& log() const { return log_; }
  bool running() const { return pid_ > 0 && !reaped_; }
  std::string output() const { return read_text(log_); }
  double seconds_since_start() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  // Sends `sig` to the child's process group.
  void kill(int sig) {
    if (running()) ::kill(-pid_, sig);
  }

  // Reaps the child if it has ended; true when it has (now or before).
  bool poll() {
    if (!running()) return reaped_;
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      record(status);
      return true;
    }
    return false;
  }

  // Waits until the child ends or `deadline`; at the deadline its process group is killed and
  // the result says timed_out. With grace_seconds > 0 the group first gets SIGTERM and that
  // long to clean up (a script's trap that tears down what it made), then SIGKILL.
  ChildExit wait_until(std::chrono::steady_clock::time_point deadline, double grace_seconds = 0) {
    while (!poll()) {
      if (std::chrono::steady_clock::now() >= deadline) {
        if (grace_seconds > 0) {
          ::kill(-pid_, SIGTERM);
          const auto end = std::chrono::steady_clock::now() +
                           std::chrono::milliseconds(static_cast<long>(grace_seconds * 1000));
          while (!poll() && std::chrono::steady_clock::now() < end) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
          }
          if (reaped_) {
            result_.timed_out = true;
            result_.exit_code = -1;
            break;
          }
        }
        ::kill(-pid_, SIGKILL);
        int status = 0;
        ::waitpid(pid_, &status, 0);
        record(status);
        result_.timed_out = true;
        result_.exit_code = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    result_.output = output();
    return result_;
  }

  // Waits until `needle` appears in the child's output, the child ends, or `deadline`; true
  // when the needle appeared.
  bool wait_for_output(const std::string& needle, std::chrono::steady_clock::time_point deadline) {
    while (std::chrono::steady_clock::now() < deadline) {
      if (output().find(needle) != std::string::npos) return true;
      if (poll()) return output().find(needle) != std::string::npos;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

 private:
  void record(int status) {
    reaped_ = true;
    result_.seconds = seconds_since_start();
    if (WIFEXITED(status)) result_.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) {
      result_.exit_code = -1;
      result_.signal = WTERMSIG(status);
    }
  }

  std::filesystem::path log_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::chrono::steady_clock::time_point start_;
  ChildExit result_;
};

// Starts ranks 0..world-1 in parallel, rank r running argv_of(r) with its output in
// log_dir/rank<r>.log, and waits for all of them, at most timeout_seconds in total (then the
// ones still running are killed and marked timed_out).
inline std::vector<ChildExit> run_ranks(int world, const std::function<std::vector<std::string>(int)>& argv_of,
                                        const std::filesystem::path& log_dir, double timeout_seconds) {
  std::filesystem::create_directories(log_dir);
  std::vector<std::unique_ptr<Child>> children;
  for (int r = 0; r < world; ++r) {
    const std::filesystem::path log = log_dir / ("rank" + std::to_string(r) + ".log");
    std::filesystem::remove(log);
    children.push_back(std::make_unique<Child>(argv_of(r), log));
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<long>(timeout_seconds * 1000));
  std::vector<ChildExit> exits;
  for (auto& c : children) exits.push_back(c->wait_until(deadline));
  return exits;
}

// The per-iteration losses of a results.json (each the loss of the whole global batch).
inline std::vector<double> iteration_losses(const nlohmann::json& results) {
  std::vector<double> out;
  for (const auto& it : results.at("iterations")) out.push_back(it.at("loss").get<double>());
  return out;
}

// The exit and output of every rank, for failure messages.
inline std::string describe_ranks(const std::vector<ChildExit>& exits) {
  std::string s;
  for (size_t r = 0; r < exits.size(); ++r) s += "--- rank " + std::to_string(r) + ": " + exits[r].describe() + "\n";
  return s;
}

}  // namespace dtlab::test
