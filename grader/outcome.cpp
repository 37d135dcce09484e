// Turning how the ranks ended into one verdict, see outcome.h.
#include "outcome.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "dtlab/core/error.h"
#include "runs.h"

namespace dtlab::grader {
namespace {

// The first line of a rank's log that contains `needle`, else "".
std::string find_line(const std::filesystem::path& log, const std::string& needle) {
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) return line;
  }
  return "";
}

std::string indent(const std::string& text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    out += "    " + text.substr(start, end == std::string::npos ? std::string::npos : end - start) + "\n";
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

// A rank's log as the verdict names it: its path for `grader run`, else just whose it is.
std::string log_name(const RankExit& r, const RunEvidence& e) {
  return e.log_paths ? fmt::format("rank {}'s log ({})", r.rank, r.log.string()) : fmt::format("rank {}'s log", r.rank);
}

std::string last_words(const RankExit& r, const RunEvidence& e) {
  const std::string tail = tail_lines(r.log, 6);
  if (tail.empty()) return fmt::format("  {} is empty (only rank 0 prints progress)\n", log_name(r, e));
  return fmt::format("  last lines of {}:\n{}", log_name(r, e), indent(tail));
}

// The error line a rank printed before it stopped ("task2b: distributed error: ..."), or "".
std::string error_line(const RankExit& r) {
  for (const char* marker : {": distributed error: ", ": error: ", ": internal error"}) {
    std::string line = find_line(r.log, marker);
    if (!line.empty()) return line;
  }
  return "";
}

// One line per other rank: how it ended and, if it said why, its words.
std::string how_others_ended(const LaunchResult& launch, int except, bool skip_killed = false) {
  std::string out;
  for (const auto& r : launch.ranks) {
    if (r.rank == except || (skip_killed && r.killed)) continue;
    std::string how = r.killed ? "killed (still running)"
                    : r.signal ? fmt::format("killed by signal {} ({})", r.signal, strsignal(r.signal))
                               : fmt::format("exit code {}", r.exit_code);
    const std::string why = r.exit_code > 0 ? error_line(r) : "";
    out += fmt::format("  rank {}: {}{}\n", r.rank, how, why.empty() ? "" : ": " + why);
  }
  return out;
}

// "0", "0 and 1", "0, 1 and 3".
std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
  }
  return out;
}

// Where a rank was when it was killed, from its last heartbeat (taken at most half a second
// before): "rank 1: in step 2, waiting in recv #7 (activation 1) for 34.8 s".
std::string where_line(int rank, const RankBeat& b) {
  const std::string step = b.step > 0 ? fmt::format("in step {}", b.step) : "before step 1";
  const double since = std::max<int64_t>(0, b.unix_ms - b.operation_unix_ms) / 1000.0;
  if (b.in_flight > 0) return fmt::format("  rank {}: {}, waiting in {} for {:.1f} s\n", rank, step, b.operation, since);
  if (b.operation == "the rendezvous") {
    return fmt::format("  rank {}: {}, in its own code: it had run no kit operation yet\n", rank, step);
  }
  return fmt::format("  rank {}: {}, in its own code: its last kit operation, {}, started {:.1f} s before and had "
                     "completed\n", rank, step, b.operation, since);
}

const RankBeat* beat_of(const RunEvidence& e, int rank) {
  return rank < static_cast<int>(e.beats.size()) && e.beats[rank] ? &*e.beats[rank] : nullptr;
}

// Note [A run that stalls] (launch.cpp): ranks still running at the run's deadline, or when no
// rank had made progress for the stall bound. Every killed rank is named, with where its
// heartbeat says it was; the logs are quoted only for what the heartbeats cannot say (a run
// without them, a rank that printed an error before it hung).
Verdict hang_verdict(const LaunchResult& launch, const std::string& what, const RunEvidence& e) {
  std::vector<int> killed;
  bool others_failed = false;
  for (const auto& r : launch.ranks) {
    if (r.killed) killed.push_back(r.rank);
    others_failed |= !r.killed && r.exit_code != 0;
  }
  const double at = launch.ranks[killed.front()].seconds;
  std::string out = fmt::format("{}: {} {} hung", what, killed.size() == 1 ? "rank" : "ranks", rank_list(killed));
  if (launch.stalled_seconds > 0) {
    out += fmt::format(": no rank had started a step or a kit operation for {:.1f} s, past this run's bound of {:.0f} s "
                       "(the longest of --timeout + {:g} s, {:g} s and {:g} times its longest pause between "
                       "operations), so the grader stopped every rank {:.0f} s into the run",
                       launch.stalled_seconds, launch.stall_bound_seconds, kFailureGraceSeconds, kStallFloorSeconds,
                       kStallFactor, at);
  } else {
    out += fmt::format(": still running after {:.0f} s{}, so {} killed", at,
                       others_failed ? ", after the other ranks had given up waiting" : "",
                       killed.size() == 1 ? "it was" : "they were");
  }
  out += ".\n";
  int waiting = 0, own_code = 0;
  std::string where, logs;
  for (const auto& r : launch.ranks) {
    if (!r.killed) continue;
    if (const RankBeat* b = beat_of(e, r.rank)) {
      where += where_line(r.rank, *b);
      (b->in_flight > 0 ? waiting : own_code) += 1;
      // An error it printed before it hung (a failed operation, then a hang on the way out).
      const std::string line = error_line(r);
      if (!line.empty()) where += "    it had printed: " + line + "\n";
    } else {
      logs += last_words(r, e);
    }
  }
  out += where + logs;
  if (others_failed) {
    out += fmt::format("The other ranks gave up waiting for {} (their errors below): a rank that never reaches the "
                       "operation the others wait in (an endless loop, a sleep, a wait on the wrong rank) stops "
                       "everyone.\n", killed.size() == 1 ? "it" : "them");
  } else if (own_code > 0 && waiting == 0) {
    out += "No rank was waiting in a kit operation, so no collective could time out: each waited in code of its own "
           "(an endless loop, a sleep, a flag or a file that no rank provides).\n";
  } else if (own_code > 0) {
    out += "The ranks in their own code never reached the operation the waiting ranks need (an endless loop, a sleep, "
           "a wait on the wrong rank): a rank that never reaches a collective stops everyone.\n";
  } else if (where.empty()) {
    out += "A rank that never reaches a collective (an endless loop, a sleep, a wait on the wrong rank) stops "
           "everyone.\n";
  }
  out += how_others_ended(launch, killed.size() == 1 ? killed.front() : -1, /*skip_killed=*/true);
  return Verdict{Status::kHang, out};
}

// Note [Who stopped] (dist/detail/heartbeat.h): when every rank stopped with a distributed error
// that says the ranks all waited for one another (heartbeat.cpp's sentence, "no rank can go on: a
// deadlock"), the run deadlocked: a deadlock verdict, with the first rank's words.
std::optional<Verdict> deadlock_verdict(const LaunchResult& launch, const std::string& what) {
  if (launch.ranks.size() < 2) return std::nullopt;
  std::string first;
  for (const auto& r : launch.ranks) {
    if (r.exit_code == 0 || r.killed || r.signal) return std::nullopt;
    const std::string line = error_line(r);
    if (line.find(kDeadlockWords) == std::string::npos) return std::nullopt;
    if (first.empty()) first = line;
  }
  return Verdict{Status::kDeadlock, fmt::format("{}: deadlock: every rank timed out waiting for another.\n  rank 0: {}",
                                                what, first)};
}

}  // namespace

const char* status_name(Status status) {
  switch (status) {
    case Status::kPassed: return "passed";
    case Status::kWrongNumber: return "wrong number";
    case Status::kNotImplemented: return "not implemented";
    case Status::kCrash: return "crash";
    case Status::kHang: return "hang";
    case Status::kError: return "error";
    case Status::kDesync: return "ranks disagree";
    case Status::kDeadlock: return "deadlock";
    case Status::kBuildFailed: return "build failed";
    case Status::kNotSubmitted: return "not submitted";
  }
  return "?";
}

std::optional<Verdict> diagnose(const LaunchResult& launch, const std::string& what, const RunEvidence& evidence) {
  if (launch.all_ok()) return std::nullopt;
  const RunEvidence& e = evidence;
  // The root cause first: a TODO, then a rank that died, then one that hung; the errors of the
  // ranks that waited for it are consequences.
  for (const auto& r : launch.ranks) {
    if (r.exit_code == kExitNotImplemented) {
      std::string todo = find_line(r.log, "TODO(");
      const size_t at = todo.find("TODO(");
      if (at != std::string::npos) todo = todo.substr(at);
      return Verdict{Status::kNotImplemented, fmt::format("{}: not implemented yet: {} (rank {}{})", what, todo, r.rank,
                                                          e.log_paths ? ", " + r.log.string() : "")};
    }
  }
  // Every rank saw the same fingerprints, so every rank says the same: quote the first.
  for (const auto& r : launch.ranks) {
    if (r.exit_code == kExitDesync) {
      std::string line = find_line(r.log, ": ranks disagree: ");
      const size_t at = line.find("ranks disagree: ");
      line = at == std::string::npos ? "(no message in " + log_name(r, e) + ")" : line.substr(at + 16);
      return Verdict{Status::kDesync,
                     fmt::format("{}: {}. Code that runs a collective on some ranks only (an "
                                 "`if (group.rank() == 0)` around an all_reduce, a return before it) makes the "
                                 "others meet a different one. (rank {}{})", what, line, r.rank,
                                 e.log_paths ? ", " + r.log.string() : "")};
    }
  }
  for (const auto& r : launch.ranks) {
    if (r.signal) {
      return Verdict{Status::kCrash,
                     fmt::format("{}: rank {} crashed: killed by signal {} ({}) after {:.1f} s\n{}{}", what, r.rank,
                                 r.signal, strsignal(r.signal), r.seconds, last_words(r, e),
                                 how_others_ended(launch, r.rank))};
    }
  }
  for (const auto& r : launch.ranks) {
    if (r.exit_code == kExitInternal) {
      return Verdict{Status::kCrash, fmt::format("{}: rank {} crashed with an internal error (exit code 1)\n{}{}",
                                                 what, r.rank, last_words(r, e), how_others_ended(launch, r.rank))};
    }
  }
  if (std::any_of(launch.ranks.begin(), launch.ranks.end(), [](const RankExit& r) { return r.killed; })) {
    return hang_verdict(launch, what, e);
  }
  if (const auto deadlock = deadlock_verdict(launch, what)) return deadlock;
  for (const auto& r : launch.ranks) {
    if (r.exit_code != 0) {
      std::string line = error_line(r);
      if (line.empty()) line = tail_lines(r.log, 1);
      while (!line.empty() && line.back() == '\n') line.pop_back();
      return Verdict{Status::kError, fmt::format("{}: rank {} stopped with exit code {}: {}\n{}", what, r.rank,
                                                 r.exit_code, line, how_others_ended(launch, r.rank))};
    }
  }
  return Verdict{Status::kError, what + ": the run failed"};
}

}  // namespace dtlab::grader
