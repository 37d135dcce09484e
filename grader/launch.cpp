// Rank processes with process groups, per-rank logs and deadlines, see launch.h.
#include "launch.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <thread>

#include "dtlab/core/error.h"
#include "dtlab/tooling/process.h"
#include "fork_ranks.h"

namespace fs = std::filesystem;

namespace dtlab::grader {
namespace {

using Clock = std::chrono::steady_clock;

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

// How long a fork server may take to load its program (an ASan build of LibTorch's is slow).
constexpr double kForkServerStartSeconds = 120;

// A rank in its own process group, its output truncated into log: forked by the run's fork
// server when there is one, else started.
pid_t spawn(const std::vector<std::string>& argv, const fs::path& log, ForkServer* server) {
  const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) throw Error("cannot write " + log.string() + ": " + std::strerror(errno));
  try {
    const pid_t pid = server ? server->fork_rank(argv, out) : spawn_process(argv, out);
    ::close(out);
    return pid;
  } catch (...) {
    ::close(out);
    throw;
  }
}

// Copies what was appended to a file since the last call to stdout.
struct Follower {
  fs::path path;
  std::streamoff offset = 0;
  void pump() {
    std::ifstream in(path, std::ios::binary);
    if (!in) return;
    in.seekg(offset);
    std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    offset += static_cast<std::streamoff>(chunk.size());
    std::fwrite(chunk.data(), 1, chunk.size(), stdout);
    std::fflush(stdout);
  }
};

}  // namespace

std::optional<RankBeat> read_beat_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  // A beat is a few dozen bytes; more is not the kit's (the rank wrote something else there).
  std::string text(4096, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return parse_beat(text);
}

namespace {

// Note [A run that stalls]: a rank killed at --run-timeout (300 s) had, in every case seen, stopped
// long before: all its ranks waited in code of their own (a loop, a sleep, a flag no rank sets)
// where no collective times out, and the grader waited out the whole deadline, four times for one
// exercise. The kit's heartbeat of each rank (its own thread: it beats while the rank waits) says
// which step and operation the rank is in, so the launcher sees progress: a rank that starts a step
// or an operation. A run where none does for the stall bound is stopped. The bound is
// max(floor, factor x the longest pause between two progress events seen so far in this run): the
// factor scales it to this machine and this run (a loaded machine, a slow submission, a long
// evaluation between steps), and the floor (the grader's: the collective timeout plus the grace)
// lets a rank that waits in a collective time out by itself first, with the kit's own diagnosis of
// who stopped. Before every rank has its first beat (start-up, the rendezvous, which has its own
// timeout), and once any rank has ended, nothing is judged. Ranks that all hang on their way out
// (a process group whose destructor waits for work that never ends) leave their last beat in the
// file, which no longer changes: stopped at the bound too.
class StallWatch {
 public:
  explicit StallWatch(const LaunchSpec& spec) : spec_(spec) {}
  bool enabled() const { return !spec_.beat_file.empty() && spec_.stall_floor_seconds > 0; }
  // Reads every rank's beat; true when the run has stalled. Judged only while every rank runs:
  // once one has ended by itself, the others may be finishing alone, without operations (rank 0
  // evaluating, writing its results), and the deadline or the grace after a failure decide.
  bool stalled(const std::vector<bool>& done, double now) {
    if (std::find(done.begin(), done.end(), true) != done.end()) return false;
    if (beats_.empty()) beats_.resize(done.size());
    bool progress = false, all_beat = true;
    for (size_t r = 0; r < done.size(); ++r) {
      const auto beat = read_beat_file(replace_rank(static_cast<int>(r)));
      if (!beat) {
        all_beat = false;
        continue;
      }
      // Where the rank is, without the beat's count and time (they move while it waits).
      const std::string where = std::to_string(beat->step) + "\n" + std::to_string(beat->in_flight) + "\n" +
                                std::to_string(beat->operation_unix_ms) + "\n" + beat->operation;
      if (where != beats_[r]) {
        beats_[r] = where;
        progress = true;
      }
    }
    if (!all_beat) return false;
    if (last_progress_ < 0 || progress) {
      if (last_progress_ >= 0) longest_pause_ = std::max(longest_pause_, now - last_progress_);
      last_progress_ = now;
      return false;
    }
    return now - last_progress_ > bound();
  }
  double bound() const { return std::max(spec_.stall_floor_seconds, spec_.stall_factor * longest_pause_); }
  double since_progress(double now) const { return now - last_progress_; }

 private:
  std::string replace_rank(int rank) const {
    std::string path = spec_.beat_file;
    const size_t at = path.find("{rank}");
    if (at != std::string::npos) path.replace(at, 6, std::to_string(rank));
    return path;
  }
  const LaunchSpec& spec_;
  std::vector<std::string> beats_;
  double last_progress_ = -1;  // -1: not every rank had beaten yet
  double longest_pause_ = 0;
};

}  // namespace

bool LaunchResult::all_ok() const {
  if (!stopped.empty()) return false;
  for (const auto& r : ranks) {
    if (r.killed || r.signal || r.exit_code != 0) return false;
  }
  return !ranks.empty();
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    const bool plain = !a.empty() && a.find_first_not_of(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") == std::string::npos;
    out += plain ? a : "'" + replace_all(a, "'", "'\\''") + "'";
  }
  return out;
}

std::vector<std::string> rank_command(const LaunchSpec& spec, int rank, int port) {
  std::vector<std::string> argv = {spec.binary.string()};
  for (const auto& a : spec.args) {
    std::string v = replace_all(a, "{rank}", std::to_string(rank));
    v = replace_all(v, "{world}", std::to_string(spec.world_size));
    v = replace_all(v, "{master}", spec.master);
    v = replace_all(v, "{port}", std::to_string(port));
    argv.push_back(v);
  }
  if (spec.hosts.empty()) return argv;
  // Another host: the same path there (a shared file system or the same checkout), run from the
  // same folder; BatchMode so a missing key fails instead of asking for a password.
  return {"ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", spec.hosts.at(rank),
          "cd " + shell_join({fs::current_path().string()}) + " && exec " + shell_join(argv)};
}

std::string tail_lines(const fs::path& path, int lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) last.pop_front();
  }
  std::string out;
  for (const auto& l : last) out += l + "\n";
  return out;
}

LaunchResult launch_ranks(const LaunchSpec& spec) {
  if (spec.world_size < 1) throw Error("world size must be at least 1");
  if (!spec.hosts.empty() && static_cast<int>(spec.hosts.size()) != spec.world_size) {
    throw Error("--hosts names " + std::to_string(spec.hosts.size()) + " host(s) for " +
                std::to_string(spec.world_size) + " ranks: give one host per rank");
  }
  if (spec.hosts.empty() && !fs::exists(spec.binary)) {
    throw Error(spec.binary.string() + " does not exist (was it built? `make build`)");
  }
  fs::create_directories(spec.log_dir);
  LaunchResult result;
  result.port = spec.port ? spec.port : free_local_port();
  const auto start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

  // Note [Ranks forked from one started program]: a server that cannot start leaves the ranks
  // to be started one by one, as they were before it; why is in fork-server.log.
  std::unique_ptr<ForkServer> server;
  if (spec.fork_ranks && spec.hosts.empty() && links_fork_server(spec.binary)) {
    const fs::path server_log = spec.log_dir / "fork-server.log";
    try {
      server = std::make_unique<ForkServer>(rank_command(spec, 0, result.port), server_log, kForkServerStartSeconds);
    } catch (const std::exception& e) {
      std::ofstream(server_log, std::ios::app) << "[dtlab launcher] every rank started by itself instead: " << e.what()
                                               << "\n";
    }
  }
  std::vector<pid_t> pids;
  for (int r = 0; r < spec.world_size; ++r) {
    RankExit e;
    e.rank = r;
    e.log = spec.log_dir / ("rank" + std::to_string(r) + ".log");
    try {
      pids.push_back(spawn(rank_command(spec, r, result.port), e.log, server.get()));
    } catch (...) {
      for (pid_t p : pids) ::kill(-p, SIGKILL);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      throw;
    }
    result.ranks.push_back(e);
  }
  server.reset();  // every rank is forked: the server's memory is the machine's again

  Follower follow{result.ranks[0].log};
  std::vector<bool> done(pids.size(), false);
  size_t remaining = pids.size();
  double first_failure = -1;
  int polls = 0;
  StallWatch stall(spec);
  while (remaining > 0) {
    for (size_t r = 0; r < pids.size(); ++r) {
      if (done[r]) continue;
      int status = 0;
      if (::waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      done[r] = true;
      --remaining;
      RankExit& e = result.ranks[r];
      e.seconds = elapsed();
      if (WIFEXITED(status)) e.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) e.signal = WTERMSIG(status);
      if ((e.exit_code != 0 || e.signal) && first_failure < 0) first_failure = e.seconds;
      ::kill(-pids[r], SIGKILL);  // anything the rank left behind in its group
    }
    if (spec.echo_rank0) follow.pump();
    if (remaining == 0) break;
    const double now = elapsed();
    const bool past_deadline = now >= spec.timeout_seconds;
    const bool past_grace = first_failure >= 0 && now >= first_failure + spec.grace_seconds;
    ++polls;
    if (spec.watch && polls % 5 == 0) result.stopped = spec.watch();
    // Once a rank has failed, the grace decides; before, four reads a second of a few bytes each.
    const bool stalled = first_failure < 0 && stall.enabled() && polls % 5 == 0 && stall.stalled(done, now);
    if (stalled) {
      result.stalled_seconds = stall.since_progress(now);
      result.stall_bound_seconds = stall.bound();
    }
    if (past_deadline || past_grace || stalled || !result.stopped.empty()) {
      for (size_t r = 0; r < pids.size(); ++r) {
        if (done[r]) continue;
        ::kill(-pids[r], SIGKILL);
        ::waitpid(pids[r], nullptr, 0);
        done[r] = true;
        result.ranks[r].killed = true;
        result.ranks[r].seconds = now;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (spec.echo_rank0) follow.pump();
  result.seconds = elapsed();
  return result;
}

}  // namespace dtlab::grader
