// dtlab-sandbox-launcher: the grader's own process inside the sandbox (Note [The sandbox] in
// sandbox.h). It starts the ranks of one run, waits for them within the deadline, kills every
// process they left behind, and reports over the status descriptor how each rank ended and the
// regular files of the scratch folder. Only the grader starts it; nothing of LibTorch is linked.
//
//   dtlab-sandbox-launcher --status-fd N --spec JSON
//
// The report, in frames: for each file "F <bytes> <path>\n" and its bytes; then "R <bytes>\n" and
// the JSON {"ranks": [...], "seconds", "port", "strays", "left_out": [...]}; then "E\n".
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "dtlab/core/error.h"
#include "launch.h"

namespace fs = std::filesystem;
using dtlab::Error;
using dtlab::grader::LaunchResult;
using dtlab::grader::LaunchSpec;

namespace {

struct Limits {
  uint64_t file_bytes = 0, total_bytes = 0, files = 0, log_bytes = 0;
};

void write_all(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(std::string("cannot write the report: ") + std::strerror(errno));
    p += n;
    size -= static_cast<size_t>(n);
  }
}

// The processes of this uid that still live (not zombies), apart from this one and PID 1.
std::vector<pid_t> live_others() {
  std::vector<pid_t> pids;
  DIR* proc = ::opendir("/proc");
  if (!proc) return pids;
  while (const dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 1 || pid == ::getpid()) continue;
    struct stat st{};
    const std::string dir = std::string("/proc/") + e->d_name;
    if (::stat(dir.c_str(), &st) != 0 || st.st_uid != ::getuid()) continue;
    FILE* f = std::fopen((dir + "/stat").c_str(), "r");
    if (!f) continue;
    char state = '?';
    // "pid (comm) S ...": the state follows the last ')' (comm may hold spaces and parentheses).
    char buffer[512] = {};
    const size_t n = std::fread(buffer, 1, sizeof buffer - 1, f);
    std::fclose(f);
    const char* close = std::strrchr(buffer, ')');
    if (close && close + 2 < buffer + n) state = close[2];
    if (state != 'Z' && state != 'X') pids.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(proc);
  return pids;
}

// Resident memory of the processes, in bytes (/proc/<pid>/statm's second field, in pages).
uint64_t resident_bytes(const std::vector<pid_t>& pids) {
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  uint64_t total = 0;
  for (const pid_t pid : pids) {
    FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/statm").c_str(), "r");
    if (!f) continue;
    unsigned long long size = 0, resident = 0;
    if (std::fscanf(f, "%llu %llu", &size, &resident) == 2) total += resident * page;
    std::fclose(f);
  }
  return total;
}

// Kills every other process of this uid (a daemon a rank started, a sleeper that ignores
// SIGTERM) and reaps those that were reparented here; returns how many there were.
int kill_strays() {
  const int strays = static_cast<int>(live_others().size());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    // kill(-1): every process this one may signal, itself excepted (a fork bomb re-forks: repeat).
    if (::kill(-1, SIGKILL) != 0 && errno == ESRCH) break;
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (live_others().empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  return strays;
}

bool plain_name(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.size() > 200) return false;
  for (const unsigned char c : name) {
    if (c < 0x21 || c > 0x7e || c == '/') return false;
  }
  return true;
}

class Reporter {
 public:
  Reporter(int fd, Limits limits) : fd_(fd), limits_(limits) {}

  // Every regular file under dir_fd (the folder `path` of the scratch folder), depth first.
  void folder(int dir_fd, const std::string& path, int depth, bool is_log) {
    if (depth > 8) {
      left_out.push_back(path + " (folders nested too deep)");
      return;
    }
    DIR* dir = ::fdopendir(dir_fd);
    if (!dir) {
      ::close(dir_fd);
      return;
    }
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(dir)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    for (const auto& name : names) {
      const std::string child = path + "/" + name;
      if (!plain_name(name)) {
        left_out.push_back(path + "/<a name with odd characters> (not brought back)");
        continue;
      }
      struct stat st{};
      if (::fstatat(::dirfd(dir), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (S_ISDIR(st.st_mode)) {
        const int sub = ::openat(::dirfd(dir), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0) folder(sub, child, depth + 1, is_log);
      } else if (S_ISREG(st.st_mode)) {
        file(::dirfd(dir), name, child, is_log);
      } else {
        left_out.push_back(child + " (not a regular file: a link, FIFO or device)");
      }
    }
    ::closedir(dir);
  }

  void finish() { write_all(fd_, "E\n", 2); }

  std::vector<std::string> left_out;

 private:
  void file(int dir_fd, const std::string& name, const std::string& path, bool is_log) {
    // O_NONBLOCK: a FIFO swapped in since the fstatat cannot block the open (all ranks are dead,
    // so nothing can swap it; belt and braces).
    const int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st{};
    if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      if (fd >= 0) ::close(fd);
      left_out.push_back(path + " (not a regular file)");
      return;
    }
    uint64_t size = static_cast<uint64_t>(st.st_size);
    uint64_t skip = 0;
    std::string preface;
    if (is_log && size > limits_.log_bytes) {
      skip = size - limits_.log_bytes;
      preface = "[dtlab sandbox: the first " + std::to_string(skip) + " bytes of this log are left out]\n";
      size = limits_.log_bytes;
    } else if (size > limits_.file_bytes) {
      left_out.push_back(path + " (" + std::to_string(size) + " bytes: over the limit of " +
                         std::to_string(limits_.file_bytes) + ")");
      ::close(fd);
      return;
    }
    if (files_ + 1 > limits_.files || sent_ + size > limits_.total_bytes) {
      left_out.push_back(path + " (over the limit of what a run brings back)");
      ::close(fd);
      return;
    }
    std::string content = preface;
    content.resize(preface.size() + size);
    size_t got = 0;
    while (got < size) {
      const ssize_t n = ::pread(fd, content.data() + preface.size() + got, size - got, static_cast<off_t>(skip + got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    ::close(fd);
    content.resize(preface.size() + got);
    const std::string header = "F " + std::to_string(content.size()) + " " + path + "\n";
    write_all(fd_, header.data(), header.size());
    write_all(fd_, content.data(), content.size());
    ++files_;
    sent_ += content.size();
  }

  int fd_;
  Limits limits_;
  uint64_t files_ = 0, sent_ = 0;
};

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

int run(int status_fd, const nlohmann::json& spec_json) {
  const fs::path scratch = spec_json.at("scratch").get<std::string>();
  // Inside bwrap's user namespace the process limit counts this sandbox's processes alone (set
  // before bwrap, it would count every process of the uid on the machine).
  if (const uint64_t nproc = spec_json.at("nproc").get<uint64_t>(); nproc > 0) {
    const rlimit limit{nproc, nproc};
    if (::setrlimit(RLIMIT_NPROC, &limit) != 0) throw Error(std::string("setrlimit: ") + std::strerror(errno));
  }
  LaunchSpec spec;
  spec.binary = spec_json.at("binary").get<std::string>();
  for (const auto& a : spec_json.at("args")) spec.args.push_back(replace_all(a.get<std::string>(), "{scratch}", scratch.string()));
  spec.world_size = spec_json.at("world").get<int>();
  spec.master = spec_json.at("master").get<std::string>();
  spec.port = spec_json.at("port").get<int>();
  spec.timeout_seconds = spec_json.at("timeout").get<double>();
  spec.grace_seconds = spec_json.at("grace").get<double>();
  // Note [A run that stalls] (launch.cpp); absent from an older grader's spec: no stall watch.
  spec.beat_file = replace_all(spec_json.value("beat_file", ""), "{scratch}", scratch.string());
  spec.stall_floor_seconds = spec_json.value("stall_floor", 0.0);
  spec.stall_factor = spec_json.value("stall_factor", 4.0);
  spec.log_dir = scratch / "logs";
  spec.fork_ranks = spec_json.value("fork_ranks", true);
  // A run's ranks never fork; a run that holds many processes is a fork bomb, which would starve
  // every rank of CPU until the deadline: stopped at once, as is one that holds too much memory.
  const size_t max_processes = spec_json.at("max_processes").get<size_t>();
  const uint64_t max_memory = spec_json.at("max_memory_bytes").get<uint64_t>();
  spec.watch = [&]() -> std::string {
    const std::vector<pid_t> pids = live_others();
    if (pids.size() > max_processes) {
      return "the run started " + std::to_string(pids.size()) + " processes, more than the sandbox's limit of " +
             std::to_string(max_processes) + " (a fork bomb?), and was stopped";
    }
    const uint64_t resident = resident_bytes(pids);
    if (max_memory > 0 && resident > max_memory) {
      return "the run's processes held " + std::to_string(resident >> 20) + " MiB of memory, more than the sandbox's limit of " +
             std::to_string(max_memory >> 20) + " MiB, and were stopped";
    }
    return "";
  };
  Limits limits{spec_json.at("copy_file_bytes").get<uint64_t>(), spec_json.at("copy_total_bytes").get<uint64_t>(),
                spec_json.at("copy_files").get<uint64_t>(), spec_json.at("log_bytes").get<uint64_t>()};

  nlohmann::json report;
  try {
    const LaunchResult result = dtlab::grader::launch_ranks(spec);
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& r : result.ranks) {
      ranks.push_back({{"rank", r.rank}, {"exit_code", r.exit_code}, {"signal", r.signal}, {"killed", r.killed},
                       {"seconds", r.seconds}});
    }
    report = {{"ranks", ranks}, {"seconds", result.seconds}, {"port", result.port}, {"stopped", result.stopped},
              {"stalled", result.stalled_seconds}, {"stall_bound", result.stall_bound_seconds}};
  } catch (const std::exception& e) {
    report = {{"error", e.what()}};
  }
  report["strays"] = spec_json.at("kill_strays").get<bool>() ? kill_strays() : 0;

  Reporter reporter(status_fd, limits);
  const int scratch_fd = ::open(scratch.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (const auto& keep : spec_json.at("keep")) {
    const std::string name = keep.get<std::string>();
    const int fd = scratch_fd < 0 ? -1 : ::openat(scratch_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) reporter.folder(fd, name, 0, name == "logs");
  }
  if (scratch_fd >= 0) ::close(scratch_fd);
  report["left_out"] = reporter.left_out;
  const std::string line = report.dump();
  const std::string framed = "R " + std::to_string(line.size()) + "\n" + line;
  write_all(status_fd, framed.data(), framed.size());
  reporter.finish();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Not dumpable: a rank (the same uid) cannot ptrace this process or open its descriptors
  // through /proc, so it cannot write the report in the launcher's place.
  ::prctl(PR_SET_DUMPABLE, 0);
  // Orphans (a rank's daemon) are reparented here, so kill_strays can reap them.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  int status_fd = -1;
  std::string spec;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--status-fd") status_fd = std::atoi(argv[i + 1]);
    else if (flag == "--spec") spec = argv[i + 1];
  }
  if (status_fd < 3 || spec.empty()) {
    std::fprintf(stderr, "dtlab-sandbox-launcher: only the grader starts this (--status-fd N --spec JSON)\n");
    return 2;
  }
  ::fcntl(status_fd, F_SETFD, FD_CLOEXEC);  // the ranks do not inherit it
  try {
    return run(status_fd, nlohmann::json::parse(spec));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtlab-sandbox-launcher: %s\n", e.what());
    return 1;
  }
}
