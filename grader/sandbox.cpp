// Starting runs and compiles inside the sandbox, see sandbox.h (Note [The sandbox]).
#include "sandbox.h"

#include "dtlab/tooling/build_paths.h"

#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include "dtlab/core/error.h"

extern char** environ;

namespace fs = std::filesystem;

namespace dtlab::grader {
namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text() { return std::strerror(errno); }

std::string fmt_seconds(double seconds) { return std::to_string(static_cast<long>(seconds)) + " s"; }

fs::path find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    const size_t colon = std::min(dirs.find(':', start), dirs.size());
    const fs::path candidate = fs::path(dirs.substr(start, colon - start)) / program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = colon + 1;
  }
  return {};
}

// The environment of every sandboxed process: a fixed PATH and home, and the variables that
// choose threads, devices and the backends' own settings; nothing else of the grader's (tokens,
// paths of the instructor's machine).
std::vector<std::string> sandbox_environment(const std::string& home) {
  std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TMPDIR=/tmp",
                                  "LANG=C.UTF-8"};
  const std::vector<std::string> passed = environment_passed_to_runs();
  env.insert(env.end(), passed.begin(), passed.end());
  return env;
}

// Note [Sanitized builds]: RLIMIT_AS is off, the sanitizer's RSS limit takes its place.
void add_sanitizer_memory_limit(std::vector<std::string>& env, uint64_t bytes) {
  const std::string setting = "hard_rss_limit_mb=" + std::to_string(bytes >> 20);
  const std::string prefix = std::string(kSanitizerOptions) + "=";
  for (std::string& var : env) {
    if (var.rfind(prefix, 0) == 0) {
      var += (var.size() > prefix.size() ? ":" : "") + setting;
      return;
    }
  }
  env.push_back(prefix + setting);
}

// What the child does between fork and exec, all prepared before the fork (nothing allocates
// after it: the grader may have threads).
struct Start {
  std::vector<std::string> argv, env;
  std::vector<int> keep_fds;   // inherited across exec
  int output_fd = -1;          // stdout and stderr
  bool switch_uid = false;
  uid_t uid = 0;
  gid_t gid = 0;
  bool new_network = false;    // user mode as root: a network namespace holding loopback only
  bool limit = true;
  // RLIMIT_NPROC here counts every process of the uid on the machine (user mode); bwrap's
  // launcher sets it inside, where it counts the sandbox's user namespace alone.
  bool limit_processes = true;
  SandboxLimits limits;
  bool limit_address_space = true;
  uint64_t cpu_seconds = 0;    // RLIMIT_CPU (the compile); 0: none
  std::string cwd;             // where it starts ("": the grader's)
};

void bring_up_loopback() {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  ifreq request{};
  std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(fd, SIOCGIFFLAGS, &request) == 0) {
    request.ifr_flags |= IFF_UP;
    ::ioctl(fd, SIOCSIFFLAGS, &request);
  }
  ::close(fd);
}

// Starts the child in a session (and so a process group) of its own, without a controlling
// terminal: nothing it starts can open /dev/tty and push input (TIOCSTI) into the terminal of the
// grader, which may be a root shell. Throws when it cannot exec.
pid_t start_child(const Start& s) {
  std::vector<char*> argv, env;
  for (const auto& a : s.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : s.env) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  const rlimit no_core{0, 0};
  const rlimit nproc{s.limits.processes, s.limits.processes};
  const rlimit as{s.limits.address_space, s.limits.address_space};
  const rlimit fsize{s.limits.file_size, s.limits.file_size};
  const rlimit nofile{s.limits.open_files, s.limits.open_files};
  const rlimit cpu{s.cpu_seconds, s.cpu_seconds};
  int exec_fds[2];
  if (::pipe2(exec_fds, O_CLOEXEC) != 0) throw Error("pipe: " + errno_text());
  const pid_t pid = ::fork();
  if (pid < 0) throw Error("fork: " + errno_text());
  if (pid == 0) {
    auto fail = [&](int step) {
      const int err[2] = {step, errno};
      (void)!::write(exec_fds[1], err, sizeof err);
      ::_exit(127);
    };
    if (::setsid() < 0) fail(5);
    ::signal(SIGPIPE, SIG_DFL);
    if (s.new_network && ::unshare(CLONE_NEWNET) == 0) bring_up_loopback();
    if (s.limit) {
      if (::setrlimit(RLIMIT_CORE, &no_core) != 0 || (s.limit_processes && ::setrlimit(RLIMIT_NPROC, &nproc) != 0) ||
          ::setrlimit(RLIMIT_FSIZE, &fsize) != 0 || ::setrlimit(RLIMIT_NOFILE, &nofile) != 0 ||
          (s.limit_address_space && ::setrlimit(RLIMIT_AS, &as) != 0) ||
          (s.cpu_seconds > 0 && ::setrlimit(RLIMIT_CPU, &cpu) != 0)) {
        fail(1);
      }
    }
    for (const int fd : s.keep_fds) ::fcntl(fd, F_SETFD, 0);
    const int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, STDIN_FILENO);
    ::dup2(s.output_fd, STDOUT_FILENO);
    ::dup2(s.output_fd, STDERR_FILENO);
    if (s.switch_uid) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(s.gid) != 0 || ::setuid(s.uid) != 0) fail(2);
      if (::setuid(0) == 0) fail(3);  // the switch must not be undoable
    }
    if (!s.cwd.empty() && ::chdir(s.cwd.c_str()) != 0) fail(6);
    ::execve(argv[0], argv.data(), env.data());
    fail(4);
  }
  // (No setpgid(pid, pid) here: made before the child's setsid, it would make the child a group
  // leader, which setsid refuses.)
  ::close(exec_fds[1]);
  int err[2] = {0, 0};
  const bool failed = ::read(exec_fds[0], err, sizeof err) == sizeof err;
  ::close(exec_fds[0]);
  if (failed) {
    ::waitpid(pid, nullptr, 0);
    const char* steps[] = {"", "setting its rlimits for", "switching to the sandbox's uid for",
                           "dropping root for", "starting", "starting a new session for", "entering its folder for"};
    throw Error("cannot start the sandbox (" + std::string(steps[err[0] % 7]) + " " + s.argv[0] + "): " +
                std::strerror(err[1]));
  }
  return pid;
}

// Every live process of uid, killed (user mode: what the launcher could not kill, if it died).
void kill_uid(uid_t uid) {
  for (int round = 0; round < 50; ++round) {
    bool any = false;
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      struct stat st{};
      if (::stat(e.path().c_str(), &st) != 0 || st.st_uid != uid) continue;
      any |= ::kill(std::stoi(name), SIGKILL) == 0;
    }
    if (!any) return;
    ::usleep(20000);
  }
}

// A uid from base .. base + 4095 that no process has now, starting from one this process picks,
// so that two gradings at once (a test suite's) take different ones.
uid_t unused_uid(uid_t base) {
  std::set<uid_t> used;
  for (const auto& e : fs::directory_iterator("/proc")) {
    struct stat st{};
    if (::stat(e.path().c_str(), &st) == 0) used.insert(st.st_uid);
  }
  static unsigned counter = 0;
  const unsigned start = static_cast<unsigned>(::getpid()) * 7919u + counter++ * 104729u;
  for (unsigned i = 0; i < 4096; ++i) {
    const uid_t uid = base + (start + i) % 4096;
    if (!used.count(uid)) return uid;
  }
  throw Error("no unused uid from " + std::to_string(base) + " to " + std::to_string(base + 4095) + " for the sandbox");
}

// The bwrap arguments that make the root file system: /usr and /etc read-only, the top-level
// links of a merged /usr (/bin -> usr/bin ...) as links, /proc of the new PID namespace, a minimal
// /dev, and a bounded /tmp. Folders are bound by descriptors (fds, opened by the caller as the
// grader's user) so that a sandbox uid that could not walk to them still sees them.
struct RootFs {
  std::vector<std::string> args;
  std::vector<int> fds;
  ~RootFs() {
    for (const int fd : fds) ::close(fd);
  }
  void bind(const fs::path& path, const std::string& how = "--ro-bind-fd") {
    const int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) throw Error("the sandbox cannot mount " + path.string() + ": " + errno_text());
    fds.push_back(fd);
    args.insert(args.end(), {how, std::to_string(fd), path.string()});
  }
  // A copy of the file's bytes at the same path, read-only with `perms`: bwrap reads them from a
  // descriptor opened here, so the sandbox uid needs no way to the file (a training order in a
  // results folder of mode 0700, a binary in the results of a grading).
  void data(const fs::path& path, const char* perms) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error("the sandbox cannot read " + path.string() + ": " + errno_text());
    fds.push_back(fd);
    args.insert(args.end(), {"--perms", perms, "--ro-bind-data", std::to_string(fd), path.string()});
  }
};

// The system's folders every sandbox sees, read-only, in order: /usr, the top-level folders of
// an unmerged /usr or the links of a merged one (/bin -> usr/bin, added to args as links), /etc.
// bind mounts one folder: by descriptor for runs, by path for the compile (it runs as the
// grader's user, who can walk to them).
void system_folders(const std::function<void(const fs::path&)>& bind, std::vector<std::string>& args) {
  bind("/usr");
  for (const char* top : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    std::error_code ec;
    if (fs::is_symlink(top, ec)) {
      args.insert(args.end(), {"--symlink", fs::read_symlink(top).string(), top});
    } else if (fs::is_directory(top, ec)) {
      bind(top);
    }
  }
  bind("/etc");
}

// Every writable mount of a sandbox is a tmpfs of bounded size: its pages are no process's
// resident memory, so the launcher's memory watch would not see a file system filling the RAM.
void writable_mounts(std::vector<std::string>& args, uint64_t tmp_bytes, uint64_t shm_bytes) {
  args.insert(args.end(), {"--proc", "/proc", "--dev", "/dev", "--size", std::to_string(shm_bytes), "--tmpfs",
                           "/dev/shm", "--size", std::to_string(tmp_bytes), "--tmpfs", "/tmp"});
}

// After the last mount: bwrap's own root and /dev tmpfs (unbounded) read-only. Not recursive, so
// the bounded tmpfs mounted on them stay writable.
void seal_root(std::vector<std::string>& args) {
  args.insert(args.end(), {"--remount-ro", "/dev", "--remount-ro", "/"});
}

void base_root(RootFs& root, uint64_t tmp_bytes, uint64_t shm_bytes) {
  system_folders([&](const fs::path& p) { root.bind(p); }, root.args);
  writable_mounts(root.args, tmp_bytes, shm_bytes);
}

std::vector<std::string> bwrap_prefix() {
  static const fs::path bwrap = find_on_path("bwrap");
  if (bwrap.empty()) throw Error("bwrap (Debian's bubblewrap) is not installed: `sudo apt install bubblewrap`");
  // Every namespace new (user, PID, network with loopback only, IPC, UTS, cgroup); bwrap's PID 1
  // dies with the grader; a new session, so nothing can push input into the grader's terminal.
  return {bwrap.string(), "--unshare-all", "--die-with-parent", "--new-session", "--hostname", "sandbox"};
}

// Reads the launcher's frames (sandbox_launcher.cpp) until "E" or the deadline.
class ReportReader {
 public:
  ReportReader(int fd, Clock::time_point deadline) : fd_(fd), deadline_(deadline) {}

  // A line without its newline; false at the end of the stream or the deadline.
  bool line(std::string* out, size_t max = 4096) {
    out->clear();
    while (true) {
      const size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        *out = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return true;
      }
      if (buffer_.size() > max || !fill()) return false;
    }
  }
  // Exactly n bytes (to sink, in pieces); false when the stream ends first.
  template <class Sink>
  bool bytes(uint64_t n, Sink&& sink) {
    while (n > 0) {
      if (buffer_.empty() && !fill()) return false;
      const size_t take = static_cast<size_t>(std::min<uint64_t>(n, buffer_.size()));
      sink(buffer_.data(), take);
      buffer_.erase(0, take);
      n -= take;
    }
    return true;
  }
  bool timed_out = false;

 private:
  bool fill() {
    char chunk[1 << 16];
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
      if (left <= 0) {
        timed_out = true;
        return false;
      }
      pollfd p{fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::min<long>(left, 1000)));
      if (ready < 0 && errno != EINTR) return false;
      if (ready <= 0) continue;
      const ssize_t n = ::read(fd_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      buffer_.append(chunk, static_cast<size_t>(n));
      return true;
    }
  }
  int fd_;
  Clock::time_point deadline_;
  std::string buffer_;
};

// A path the launcher reported, checked again here: plain names, under one of the kept folders.
bool acceptable_path(const std::string& path, const std::vector<std::string>& keep) {
  if (path.empty() || path.size() > 1024 || path[0] == '/') return false;
  size_t start = 0;
  int depth = 0;
  std::string first;
  while (start <= path.size()) {
    const size_t slash = std::min(path.find('/', start), path.size());
    const std::string part = path.substr(start, slash - start);
    if (part.empty() || part == "." || part == ".." || ++depth > 10) return false;
    for (const unsigned char c : part) {
      if (c < 0x21 || c > 0x7e) return false;
    }
    if (first.empty()) first = part;
    start = slash + 1;
  }
  return std::find(keep.begin(), keep.end(), first) != keep.end() && depth > 1;
}

const std::vector<std::string> kKept = {"output", "dump", "logs"};

}  // namespace

std::vector<std::string> environment_passed_to_runs() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string var = *e;
    for (const char* prefix : {"OMP_", "MKL_", "OPENBLAS_", "CUDA_VISIBLE_DEVICES=", "NCCL_", "GLOO_", "TORCH_",
                               "DTLAB_", "ASAN_OPTIONS=", "UBSAN_OPTIONS=", "LSAN_OPTIONS=", "TSAN_OPTIONS="}) {
      if (var.rfind(prefix, 0) == 0) env.push_back(var);
    }
  }
  return env;
}

std::string sandbox_mode_name(SandboxMode mode) {
  switch (mode) {
    case SandboxMode::kBubblewrap: return "bwrap";
    case SandboxMode::kUser: return "user";
    case SandboxMode::kNone: return "none";
  }
  return "?";
}

namespace {

// Whether a bwrap sandbox starts here as the uid the runs would use ("" when it does).
std::string bwrap_refusal(const Sandbox& candidate) {
  try {
    RootFs root;
    base_root(root, 1 << 20, 1 << 20);
    seal_root(root.args);
    Start s;
    s.argv = bwrap_prefix();
    s.argv.insert(s.argv.end(), root.args.begin(), root.args.end());
    s.argv.insert(s.argv.end(), {"--", "/usr/bin/true"});
    s.env = sandbox_environment("/tmp");
    s.keep_fds = root.fds;
    s.switch_uid = ::geteuid() == 0;
    s.uid = candidate.uid;
    s.gid = candidate.gid;
    s.limits = candidate.limits;
    // As for the runs: set before bwrap, RLIMIT_NPROC counts every process of the uid on the
    // machine, and bwrap's runs share one uid; another grading's fork bomb (up to its limit in
    // its own namespace) would make this probe fail with EAGAIN and refuse a sandbox that starts.
    s.limit_processes = false;
    char name[] = "/tmp/dtlab-bwrap-probe-XXXXXX";
    const int out = ::mkstemp(name);
    if (out < 0) return "cannot write a probe log in /tmp";
    ::unlink(name);
    s.output_fd = out;
    const pid_t pid = start_child(s);
    int status = 0;
    ::waitpid(pid, &status, 0);
    std::string said(4096, '\0');
    const ssize_t n = ::pread(out, said.data(), said.size(), 0);
    said.resize(n > 0 ? static_cast<size_t>(n) : 0);
    ::close(out);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
    while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
    return said.empty() ? "bwrap failed (status " + std::to_string(status) + ")" : said;
  } catch (const Error& e) {
    return e.what();
  }
}

std::vector<fs::path> library_folders() {
  std::vector<fs::path> folders;
  const std::string dirs = build_paths::sandbox_library_dirs;
  for (size_t start = 0; start <= dirs.size();) {
    const size_t sep = std::min(dirs.find(':', start), dirs.size());
    const fs::path dir = dirs.substr(start, sep - start);
    start = sep + 1;
    std::error_code ec;
    if (dir.empty() || !fs::is_directory(dir, ec)) continue;
    const fs::path canonical = fs::canonical(dir, ec);
    if (ec || canonical.string().rfind("/usr/", 0) == 0) continue;  // /usr is mounted anyway
    folders.push_back(canonical);
  }
  return folders;
}

// The files that the sanitizers' settings name (suppressions=PATH), to mount read-only: a
// sanitizer whose suppressions file is missing stops the program (Note [Sanitized builds]).
std::vector<fs::path> sanitizer_files() {
  std::vector<fs::path> files;
  for (const char* var : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"}) {
    const char* value = std::getenv(var);
    if (!value) continue;
    const std::string options = value;
    for (size_t at = options.find("suppressions="); at != std::string::npos;
         at = options.find("suppressions=", at + 1)) {
      const size_t start = at + std::string("suppressions=").size();
      const fs::path file = options.substr(start, options.find_first_of(": ", start) - start);
      std::error_code ec;
      if (file.is_absolute() && fs::is_regular_file(file, ec)) files.push_back(file);
    }
  }
  return files;
}

}  // namespace

Sandbox choose_sandbox(const std::string& requested, const fs::path& launcher) {
  if (requested != "auto" && requested != "bwrap" && requested != "user" && requested != "none") {
    throw Error("--sandbox " + requested + ": use auto, bwrap, user or none");
  }
  Sandbox s;
  s.launcher = fs::absolute(launcher);
  if (!fs::exists(s.launcher)) throw Error(s.launcher.string() + " does not exist (was the grader built? `make build`)");
  s.read_only = library_folders();
  for (const fs::path& f : sanitizer_files()) s.read_only.push_back(f);
  if (s.limits.memory_bytes == 0) {
    s.limits.memory_bytes = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                            static_cast<uint64_t>(::sysconf(_SC_PAGE_SIZE)) / 4 * 3;
  }
  // What all runs of a grading may bring back, in MiB (a machine with a small disk; the tests).
  if (const char* mib = std::getenv("DTLAB_SANDBOX_GRADING_COPY_MIB")) {
    const std::string text = mib;
    if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) {
      throw Error("DTLAB_SANDBOX_GRADING_COPY_MIB=" + text + ": give a whole number of MiB (the default is " +
                  std::to_string(s.limits.copy_grading_bytes >> 20) + ")");
    }
    s.limits.copy_grading_bytes = std::stoull(text) << 20;
  }
  if (const char* uid = std::getenv("DTLAB_SANDBOX_UID")) {
    s.uid = static_cast<uid_t>(std::stoul(uid));
    s.gid = static_cast<gid_t>(s.uid);
  }
  if (requested == "none") {
    s.mode = SandboxMode::kNone;
    s.note = "no isolation (--sandbox none)";
    return s;
  }
  std::string refused;
  if (requested == "auto" || requested == "bwrap") {
    refused = bwrap_refusal(s);
    if (refused.empty()) {
      s.mode = SandboxMode::kBubblewrap;
      return s;
    }
    if (requested == "bwrap") throw Error("--sandbox bwrap: bubblewrap cannot start a sandbox here: " + refused);
  }
  if (::geteuid() != 0) {
    throw Error("no sandbox can start here: " + (refused.empty() ? "" : "bubblewrap: " + refused + "; ") +
                "the fallback (a separate uid) needs root. Grade as root, or install bubblewrap "
                "and allow user namespaces; --sandbox none runs student code without isolation");
  }
  s.mode = SandboxMode::kUser;
  // May this root make a network namespace (a container's seccomp filter may refuse)?
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(::unshare(CLONE_NEWNET) == 0 ? 0 : 1);
  int status = 1;
  if (pid > 0) ::waitpid(pid, &status, 0);
  const bool network = pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  s.note = "a uid of each run's own from " + std::to_string(s.uid) + ", rlimits" +
           (network ? ", loopback-only network namespace" : ", network NOT isolated (no network namespace here)") +
           (refused.empty() ? "" : "; bubblewrap refused: " + refused);
  return s;
}

SandboxResult run_in_sandbox(const Sandbox& sandbox, const SandboxRun& run) {
  const auto started = Clock::now();
  fs::create_directories(run.copy_to);
  const bool bwrap = sandbox.mode == SandboxMode::kBubblewrap;
  const bool as_other_uid = ::geteuid() == 0 && sandbox.mode != SandboxMode::kNone;
  // User mode: a uid of the run's own, so its process limit and the killing of every process of
  // the uid concern this run alone, also beside another grading. (bwrap's runs share one: its
  // limits and kills stay inside each sandbox's namespaces.)
  const uid_t uid = sandbox.mode == SandboxMode::kUser && as_other_uid ? unused_uid(sandbox.uid) : sandbox.uid;
  const gid_t gid = sandbox.mode == SandboxMode::kUser && as_other_uid ? static_cast<gid_t>(uid) : sandbox.gid;

  // The scratch folder: a bounded tmpfs inside bwrap; a fresh folder of the sandbox uid otherwise.
  fs::path scratch = "/scratch";
  std::string host_scratch;
  if (!bwrap) {
    char name[] = "/tmp/dtlab-scratch-XXXXXX";
    if (!::mkdtemp(name)) throw Error("cannot make a scratch folder in /tmp: " + errno_text());
    host_scratch = name;
    scratch = host_scratch;
    if (as_other_uid && ::chown(name, uid, gid) != 0) {
      throw Error("cannot give " + host_scratch + " to the sandbox uid: " + errno_text());
    }
  }
  struct ScratchRemover {
    std::string path;
    ~ScratchRemover() {
      std::error_code ec;
      if (!path.empty()) fs::remove_all(path, ec);
    }
  } remover{host_scratch};

  // The files a run reads (its binary, a training order) may lie where the sandbox uid has no
  // way (a results folder of mode 0700, as `mktemp -d` makes): bwrap gets copies of their bytes
  // from descriptors opened here; in user mode they are copied into the run's own scratch
  // folder, and the arguments that name them name the copies.
  const fs::path binary = fs::absolute(run.spec.binary);
  std::vector<fs::path> input_files;
  for (const auto& p : run.inputs) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) input_files.push_back(fs::absolute(p));
  }
  std::string run_binary = binary.string();
  std::vector<std::string> run_args = run.spec.args;
  if (!bwrap && as_other_uid) {
    const fs::path in = fs::path(host_scratch) / "in";
    fs::create_directories(in);
    auto copy_in = [&](const fs::path& from, fs::perms perms) {
      const fs::path to = in / from.filename();
      fs::copy_file(from, to, fs::copy_options::overwrite_existing);
      fs::permissions(to, perms);
      if (::chown(to.c_str(), uid, gid) != 0) throw Error("cannot give " + to.string() + " to the sandbox uid: " + errno_text());
      return to.string();
    };
    for (const auto& f : input_files) {
      const std::string copy = copy_in(f, fs::perms::owner_read);
      for (auto& a : run_args) {
        if (a == f.string()) a = copy;
      }
    }
    run_binary = copy_in(binary, fs::perms::owner_read | fs::perms::owner_exec);
    if (::chown(in.c_str(), uid, gid) != 0) throw Error("cannot give " + in.string() + " to the sandbox uid: " + errno_text());
  }

  nlohmann::json spec = {{"scratch", scratch.string()},
                         {"binary", run_binary},
                         {"args", run_args},
                         {"world", run.spec.world_size},
                         {"master", run.spec.master},
                         {"port", run.spec.port},
                         {"timeout", run.spec.timeout_seconds},
                         {"grace", run.spec.grace_seconds},
                         {"beat_file", run.spec.beat_file},
                         {"stall_floor", run.spec.stall_floor_seconds},
                         {"stall_factor", run.spec.stall_factor},
                         {"kill_strays", sandbox.mode != SandboxMode::kNone},
                         {"fork_ranks", run.spec.fork_ranks},
                         {"nproc", bwrap ? sandbox.limits.processes : 0},
                         {"max_processes", sandbox.mode == SandboxMode::kNone ? 1u << 30 : sandbox.limits.run_processes},
                         {"max_memory_bytes", sandbox.mode == SandboxMode::kNone ? 0 : sandbox.limits.memory_bytes},
                         {"keep", kKept},
                         {"copy_file_bytes", sandbox.limits.copy_file_bytes},
                         {"copy_total_bytes", sandbox.limits.copy_total_bytes},
                         {"copy_files", sandbox.limits.copy_files},
                         {"log_bytes", sandbox.limits.log_bytes}};

  int status_fds[2];
  if (::pipe2(status_fds, O_CLOEXEC) != 0) throw Error("pipe: " + errno_text());
  const fs::path sandbox_log = run.copy_to / "sandbox.log";
  const int log_fd = ::open(sandbox_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    ::close(status_fds[0]);
    ::close(status_fds[1]);
    throw Error("cannot write " + sandbox_log.string() + ": " + errno_text());
  }

  RootFs root;
  Start s;
  s.output_fd = log_fd;
  s.limits = sandbox.limits;
  s.limit = sandbox.mode != SandboxMode::kNone;
  s.limit_address_space = sandbox.limit_address_space;
  s.limit_processes = !bwrap;
  s.keep_fds = {status_fds[1]};
  const std::vector<std::string> launcher_args = {sandbox.launcher.string(), "--status-fd",
                                                  std::to_string(status_fds[1]), "--spec", spec.dump()};
  if (bwrap) {
    base_root(root, sandbox.limits.tmp_bytes, sandbox.limits.shm_bytes);
    std::set<std::string> bound;
    for (const auto& p : sandbox.read_only) {
      if (bound.insert(p.string()).second) root.bind(p);
    }
    for (const auto& p : run.inputs) {
      const fs::path a = fs::absolute(p);
      if (!bound.insert(a.string()).second) continue;
      if (std::find(input_files.begin(), input_files.end(), a) != input_files.end()) root.data(a, "0444");
      else root.bind(a);
    }
    if (bound.insert(binary.string()).second) root.data(binary, "0555");
    root.bind(sandbox.launcher);
    if (!sandbox.limit_address_space) {  // a GPU run: the driver's devices and sysfs
      for (const auto& e : fs::directory_iterator("/dev")) {
        // By path: bwrap has no descriptor form for devices; /dev is open to every uid.
        if (e.path().filename().string().rfind("nvidia", 0) == 0) {
          root.args.insert(root.args.end(), {"--dev-bind", e.path().string(), e.path().string()});
        }
      }
      root.bind("/sys");
    }
    s.argv = bwrap_prefix();
    s.argv.insert(s.argv.end(), root.args.begin(), root.args.end());
    s.argv.insert(s.argv.end(), {"--size", std::to_string(sandbox.limits.scratch_bytes), "--tmpfs", "/scratch"});
    seal_root(s.argv);
    s.argv.insert(s.argv.end(), {"--chdir", "/scratch", "--"});
    s.argv.insert(s.argv.end(), launcher_args.begin(), launcher_args.end());
    s.keep_fds.insert(s.keep_fds.end(), root.fds.begin(), root.fds.end());
  } else {
    s.argv = launcher_args;
    s.new_network = as_other_uid;
  }
  s.env = sandbox_environment(scratch.string());
  if (kSanitizedBuild && !sandbox.limit_address_space) add_sanitizer_memory_limit(s.env, sandbox.limits.address_space);
  s.switch_uid = as_other_uid;
  s.uid = uid;
  s.gid = gid;

  pid_t pid = -1;
  try {
    pid = start_child(s);
  } catch (...) {
    ::close(status_fds[0]);
    ::close(status_fds[1]);
    ::close(log_fd);
    throw;
  }
  ::close(status_fds[1]);
  ::close(log_fd);

  // The launcher's own deadline is the run's; this one also covers starting and copying back.
  ReportReader reader(status_fds[0], started + std::chrono::milliseconds(static_cast<long>(
                                                   (run.spec.timeout_seconds + 120) * 1000)));
  SandboxResult result;
  nlohmann::json report;
  bool ended = false;
  uint64_t files = 0, total = 0;
  std::string header;
  while (!ended && reader.line(&header)) {
    if (header == "E") {
      ended = true;
      break;
    }
    const size_t space = header.find(' ', 2);
    if (header.size() < 3 || (header[0] != 'F' && header[0] != 'R') || header[1] != ' ') break;
    uint64_t size = 0;
    try {
      size = std::stoull(header.substr(2, space == std::string::npos ? std::string::npos : space - 2));
    } catch (const std::exception&) {
      break;
    }
    if (header[0] == 'R') {
      std::string text;
      if (size > (16u << 20) || !reader.bytes(size, [&](const char* p, size_t n) { text.append(p, n); })) break;
      report = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      continue;
    }
    const std::string path = space == std::string::npos ? "" : header.substr(space + 1);
    const bool fits = size <= std::max(sandbox.limits.copy_file_bytes, sandbox.limits.log_bytes + 4096) &&
                      total + size <= sandbox.limits.copy_total_bytes && files < sandbox.limits.copy_files;
    // The grading's bound: what every run before this one brought back counts.
    const bool grading_fits = *sandbox.copied + size <= sandbox.limits.copy_grading_bytes;
    if (fits && !grading_fits) {
      result.left_out.push_back(path + " (over the grading's limit of " +
                                std::to_string(sandbox.limits.copy_grading_bytes >> 20) + " MiB brought back)");
    }
    int out = -1;
    if (fits && grading_fits && acceptable_path(path, kKept)) {
      // logs/rank<r>.log lands beside run.json as rank<r>.log, where `grader run` puts it too.
      const fs::path dest = run.copy_to / (path.rfind("logs/", 0) == 0 ? path.substr(5) : path);
      fs::create_directories(dest.parent_path());
      out = ::open(dest.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    }
    if (out < 0 && fits && grading_fits) result.left_out.push_back(path + " (refused by the grader)");
    if (out < 0 && !fits) result.left_out.push_back(path + " (refused by the grader: over a run's limits)");
    if (out >= 0) *sandbox.copied += size;
    bool written = true;
    const bool read = reader.bytes(size, [&](const char* p, size_t n) {
      if (out >= 0 && ::write(out, p, n) != static_cast<ssize_t>(n)) written = false;
    });
    if (out >= 0) ::close(out);
    if (!written) result.left_out.push_back(path + " (the grader could not write it)");
    if (!read) break;
    ++files;
    total += size;
  }
  ::close(status_fds[0]);
  // Whatever is left: bwrap's PID 1 takes its namespace with it; in user mode every process of
  // the sandbox uid; in none mode the launcher's group (the ranks have groups of their own, which
  // launch_ranks kills).
  ::kill(-pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  if (sandbox.mode == SandboxMode::kUser && as_other_uid) kill_uid(uid);
  result.sandbox_seconds = std::chrono::duration<double>(Clock::now() - started).count();

  if (!ended || !report.is_object()) {
    std::ifstream in(sandbox_log);
    std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (said.size() > 2000) said = said.substr(said.size() - 2000);
    throw Error(std::string(reader.timed_out ? "the sandbox did not finish within the run's deadline"
                                             : "the sandbox's launcher ended without its report (killed by the run?)") +
                (said.empty() ? "" : ": " + said));
  }
  if (report.contains("error")) throw Error(report["error"].get<std::string>());
  for (const auto& r : report.at("ranks")) {
    RankExit e;
    e.rank = r.at("rank").get<int>();
    e.exit_code = r.at("exit_code").get<int>();
    e.signal = r.at("signal").get<int>();
    e.killed = r.at("killed").get<bool>();
    e.seconds = r.at("seconds").get<double>();
    e.log = run.copy_to / ("rank" + std::to_string(e.rank) + ".log");
    result.launch.ranks.push_back(e);
  }
  result.launch.seconds = report.at("seconds").get<double>();
  result.launch.port = report.at("port").get<int>();
  result.launch.stopped = report.value("stopped", "");
  result.launch.stalled_seconds = report.value("stalled", 0.0);
  result.launch.stall_bound_seconds = report.value("stall_bound", 0.0);
  result.strays_killed = report.value("strays", 0);
  for (const auto& l : report.value("left_out", nlohmann::json::array())) result.left_out.push_back(l.get<std::string>());
  return result;
}

CompileJail::~CompileJail() {
  std::error_code ec;
  if (!work.empty()) fs::remove_all(work, ec);
  if (as_other_uid) kill_uid(uid);  // nothing of the compile outlives it
}

void open_compile_jail(const Sandbox& sandbox, CompileJail* jail) {
  char name[] = "/tmp/dtlab-build-XXXXXX";
  if (!::mkdtemp(name)) throw Error("cannot make a build folder in /tmp: " + errno_text());
  jail->work = name;
  jail->as_other_uid = ::geteuid() == 0 && sandbox.mode != SandboxMode::kNone;
  // A uid of the compile's own (not the runs' shared bwrap uid): its process limit counts the
  // compile's processes alone, and every process of it can be killed afterwards.
  jail->uid = jail->as_other_uid ? unused_uid(sandbox.uid) : ::geteuid();
  jail->gid = jail->as_other_uid ? static_cast<gid_t>(jail->uid) : ::getegid();
}

void hand_to_compile(const CompileJail& jail) {
  if (!jail.as_other_uid) return;
  auto give = [&](const fs::path& p) {
    if (::lchown(p.c_str(), jail.uid, jail.gid) != 0) {
      throw Error("cannot give " + p.string() + " to the compile's uid: " + errno_text());
    }
  };
  give(jail.work);
  for (const auto& e : fs::recursive_directory_iterator(jail.work)) give(e.path());
}

CompileResult run_compile(const Sandbox& sandbox, const CompileJail& jail, const std::vector<std::string>& argv) {
  const CompileLimits& limits = sandbox.compile_limits;
  Start s;
  s.limits = sandbox.limits;
  s.limits.processes = limits.processes;
  s.limits.address_space = limits.address_space;
  s.limits.file_size = limits.file_size;
  s.limit = sandbox.mode != SandboxMode::kNone;
  // The process limit counts every process of the uid on the machine: the compile's own uid only.
  s.limit_processes = jail.as_other_uid;
  s.limit_address_space = !kSanitizedBuild;  // the grader's own compiler is no sanitized program
  s.cpu_seconds = limits.cpu_seconds;
  s.switch_uid = jail.as_other_uid;
  s.uid = jail.uid;
  s.gid = jail.gid;
  s.cwd = jail.work.string();
  s.env = sandbox_environment(jail.work.string());
  if (sandbox.mode == SandboxMode::kBubblewrap) {
    s.argv = bwrap_prefix();
    system_folders([&](const fs::path& p) { s.argv.insert(s.argv.end(), {"--ro-bind", p.string(), p.string()}); }, s.argv);
    writable_mounts(s.argv, limits.tmp_bytes, sandbox.limits.shm_bytes);
    for (const auto& p : sandbox.read_only) s.argv.insert(s.argv.end(), {"--ro-bind", p.string(), p.string()});
    for (const auto& p : jail.visible) s.argv.insert(s.argv.end(), {"--ro-bind", p.string(), p.string()});
    s.argv.insert(s.argv.end(), {"--bind", jail.work.string(), jail.work.string()});
    seal_root(s.argv);
    s.argv.insert(s.argv.end(), {"--chdir", jail.work.string(), "--"});
  }
  s.argv.insert(s.argv.end(), argv.begin(), argv.end());

  // The output goes to a file of the grader's (the compile may print without end: the file size
  // limit stops it), of which the last part is kept.
  char name[] = "/tmp/dtlab-compile-log-XXXXXX";
  const int out = ::mkstemp(name);
  if (out < 0) throw Error("cannot make a compile log in /tmp: " + errno_text());
  ::unlink(name);
  s.output_fd = out;
  CompileResult result;
  pid_t pid = -1;
  try {
    pid = start_child(s);
  } catch (...) {
    ::close(out);
    throw;
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<long>(limits.seconds * 1000));
  int status = 0;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (Clock::now() > deadline) {
      result.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    ::usleep(20000);
  }
  ::kill(-pid, SIGKILL);  // whatever the compile left in its session
  if (jail.as_other_uid) kill_uid(jail.uid);
  struct stat st{};
  const uint64_t size = ::fstat(out, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  const uint64_t keep = std::min<uint64_t>(size, limits.output_bytes);
  std::string text(keep, '\0');
  const ssize_t n = ::pread(out, text.data(), keep, static_cast<off_t>(size - keep));
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  ::close(out);
  if (keep < size) {
    result.output = "[dtlab: the compiler's first " + std::to_string(size - keep) + " bytes of output are left out]\n";
  }
  result.output += text;
  if (!result.timed_out && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  // GCC's driver reports a stage that a signal ended ("... signal terminated program as"); the
  // driver itself may be the one signalled, as clang is (it assembles inside the driver's own
  // process, so a file size limit stops the driver). Under bwrap the compiler is bwrap's child,
  // and a child that a signal ended comes back as bwrap's exit status 128 + the signal. Either
  // way the limits are named.
  int stop_signal = !result.timed_out && WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  const bool bwrap_says_signal = sandbox.mode == SandboxMode::kBubblewrap && result.exit_code > 128 &&
                                 result.exit_code <= 128 + 64;
  if (stop_signal == 0 && bwrap_says_signal) stop_signal = result.exit_code - 128;
  const bool signalled = stop_signal != 0;
  if (result.timed_out || signalled || result.output.find("signal terminated program") != std::string::npos) {
    result.output += "\n[dtlab: the compile was stopped" +
                     (signalled ? " by signal " + std::to_string(stop_signal) : std::string()) +
                     (result.timed_out ? " after " + fmt_seconds(limits.seconds) : std::string()) +
                     "; its limits: " + compile_limits_text(limits) + "]\n";
  }
  return result;
}

std::string compile_limits_text(const CompileLimits& limits) {
  return std::to_string(limits.cpu_seconds) + " s of CPU time and " + std::to_string(limits.address_space >> 30) +
         " GiB of address space per process, files of " + std::to_string(limits.file_size >> 20) + " MiB, " +
         std::to_string(limits.processes) + " processes, " + fmt_seconds(limits.seconds) + " per command";
}

std::vector<fs::path> answers_readable_by_sandbox(const Sandbox& sandbox, const fs::path& source_dir,
                                                  const fs::path& build_dir) {
  if (sandbox.mode != SandboxMode::kUser || ::geteuid() != 0) return {};
  // The candidates: every file of the answers' folders and the programs built from them. The
  // build's tests and benchmarks compile solution sources in only beside solutions/ (a student
  // release's tests hold no answers, and it has no benchmarks).
  std::vector<fs::path> candidates;
  std::error_code ec;
  const bool answers_built = fs::exists(source_dir / "solutions", ec);
  for (const fs::path& folder : {source_dir / "solutions", source_dir / "tests" / "mutants", build_dir / "tests",
                                 build_dir / "bench"}) {
    if (!fs::is_directory(folder, ec)) continue;
    if (!answers_built && folder.parent_path() == build_dir) continue;
    candidates.push_back(folder);
    for (auto it = fs::recursive_directory_iterator(folder, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->is_regular_file(ec)) candidates.push_back(it->path());
    }
  }
  for (auto it = fs::directory_iterator(build_dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > 9 && name.compare(name.size() - 9, 9, "-solution") == 0) candidates.push_back(it->path());
  }
  if (candidates.empty()) return {};
  // Tried as the uid: a child that switches to it and opens each (a folder: lists it); it
  // writes back one byte per candidate.
  std::vector<const char*> paths;
  for (const auto& c : candidates) paths.push_back(c.c_str());
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Error("pipe: " + errno_text());
  const pid_t pid = ::fork();
  if (pid < 0) throw Error("fork: " + errno_text());
  if (pid == 0) {
    ::close(fds[0]);
    if (::setgroups(0, nullptr) != 0 || ::setgid(sandbox.gid) != 0 || ::setuid(sandbox.uid) != 0) ::_exit(1);
    for (const char* p : paths) {
      const int fd = ::open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // a FIFO must not block it
      const char yes = fd >= 0 ? 1 : 0;
      if (fd >= 0) ::close(fd);
      if (::write(fds[1], &yes, 1) != 1) ::_exit(1);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::vector<fs::path> readable;
  for (size_t i = 0; i < candidates.size(); ++i) {
    char yes = 0;
    if (::read(fds[0], &yes, 1) != 1) break;
    if (yes) readable.push_back(candidates[i]);
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw Error("cannot try the kit's files as the sandbox's uid " + std::to_string(sandbox.uid));
  }
  return readable;
}

}  // namespace dtlab::grader
