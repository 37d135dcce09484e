// Launching the ranks of one run: every rank a child process in its own process group, its
// output in its own log, and a deadline after which whatever still runs is killed. The grader's
// checks and `grader run` both start ranks this way, so nothing a student writes can hang them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dtlab/dist/beat.h"

namespace dtlab::grader {

struct LaunchSpec {
  std::filesystem::path binary;
  // Arguments of every rank; "{rank}", "{world}", "{master}" and "{port}" are filled in.
  std::vector<std::string> args;
  int world_size = 1;
  std::string master = "127.0.0.1";
  int port = 0;                        // 0: a free local port
  std::vector<std::string> hosts;      // empty: local processes; else rank r runs on hosts[r] over ssh
  std::filesystem::path log_dir;       // rank<r>.log for every rank
  double timeout_seconds = 300;        // the whole run
  // Once a rank has failed, the others get this long to stop by themselves (they notice at
  // their next collective, or after the collective timeout) before they count as hung.
  double grace_seconds = 60;
  bool echo_rank0 = false;             // copy rank 0's log to stdout as it grows
  // Note [A run that stalls]: where each rank's kit writes its heartbeat ("{rank}" filled; the
  // ranks' --beat_file), "" for none. With stall_floor_seconds > 0, a run in which no rank has
  // started a step or an operation (a collective, a send, a recv) for
  // max(stall_floor_seconds, stall_factor x the longest such pause so far) is stopped: every rank
  // is killed and stalled_seconds says after how long. Judged only while every rank still runs.
  std::string beat_file;
  double stall_floor_seconds = 0;
  double stall_factor = 4;
  // Asked about four times a second while ranks run; an answer other than "" stops the run: every
  // rank is killed and the answer is the reason (the sandbox's process and memory limits).
  std::function<std::string()> watch;
  // Note [Ranks forked from one started program] (dtlab/tooling/fork_server.h): local ranks of a
  // program that links the fork server are forked from one start of it; false: each exec'd.
  bool fork_ranks = true;
};

struct RankExit {
  int rank = 0;
  int exit_code = -1;        // when it exited by itself
  int signal = 0;            // when a signal it did not get from us ended it
  bool killed = false;       // still running at the deadline (or after the grace): killed by us
  double seconds = 0;        // from launch to its end
  std::filesystem::path log;
};

struct LaunchResult {
  std::vector<RankExit> ranks;
  double seconds = 0;
  int port = 0;
  std::string stopped;  // why the watch stopped the run, if it did
  // Note [A run that stalls]: how long no rank had made progress when the run was stopped for it
  // (0: it was not), and the bound it had passed.
  double stalled_seconds = 0;
  double stall_bound_seconds = 0;
  bool all_ok() const;
};

// A rank's heartbeat as the kit writes it to --beat_file (dtlab/dist/beat.h).
using RankBeat = dist::Beat;
inline std::optional<RankBeat> parse_beat(const std::string& text) { return dist::decode_beat(text); }
std::optional<RankBeat> read_beat_file(const std::filesystem::path& path);

// The argv of rank r (local, or wrapped in ssh for hosts[r]).
std::vector<std::string> rank_command(const LaunchSpec& spec, int rank, int port);

// Starts every rank, waits for all of them within the deadline and returns how each ended.
// Throws dtlab::Error when a rank cannot be started at all (missing binary, no ssh).
LaunchResult launch_ranks(const LaunchSpec& spec);

// The last `lines` non-empty lines of a file ("" when it cannot be read).
std::string tail_lines(const std::filesystem::path& path, int lines);

// The whole command line, quoted for a POSIX shell.
std::string shell_join(const std::vector<std::string>& argv);

}  // namespace dtlab::grader
