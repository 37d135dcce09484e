// Turning how the ranks ended into one verdict, see outcome.h.
#include "outcome.h"

#include <fmt/format.h>

#include <cstring>
#include <fstream>

#include "dtlab/core/error.h"

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

std::string last_words(const RankExit& r) {
  const std::string tail = tail_lines(r.log, 6);
  if (tail.empty()) return fmt::format("  rank {}'s log ({}) is empty (only rank 0 prints progress)\n", r.rank, r.log.string());
  return fmt::format("  last lines of rank {}'s log ({}):\n{}", r.rank, r.log.string(), indent(tail));
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
std::string how_others_ended(const LaunchResult& launch, int except) {
  std::string out;
  for (const auto& r : launch.ranks) {
    if (r.rank == except) continue;
    std::string how = r.killed ? "killed (still running)"
                    : r.signal ? fmt::format("killed by signal {} ({})", r.signal, strsignal(r.signal))
                               : fmt::format("exit code {}", r.exit_code);
    const std::string why = r.exit_code > 0 ? error_line(r) : "";
    out += fmt::format("  rank {}: {}{}\n", r.rank, how, why.empty() ? "" : ": " + why);
  }
  return out;
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
    case Status::kBuildFailed: return "build failed";
    case Status::kNotSubmitted: return "not submitted";
  }
  return "?";
}

std::optional<Verdict> diagnose(const LaunchResult& launch, const std::string& what) {
  if (launch.all_ok()) return std::nullopt;
  // The root cause first: a TODO, then a rank that died, then one that hung; the errors of the
  // ranks that waited for it are consequences.
  for (const auto& r : launch.ranks) {
    if (r.exit_code == kExitNotImplemented) {
      std::string todo = find_line(r.log, "TODO(");
      const size_t at = todo.find("TODO(");
      if (at != std::string::npos) todo = todo.substr(at);
      return Verdict{Status::kNotImplemented,
                     fmt::format("{}: not implemented yet: {} (rank {}, {})", what, todo, r.rank, r.log.string())};
    }
  }
  // Every rank saw the same fingerprints, so every rank says the same: quote the first.
  for (const auto& r : launch.ranks) {
    if (r.exit_code == kExitDesync) {
      std::string line = find_line(r.log, ": ranks disagree: ");
      const size_t at = line.find("ranks disagree: ");
      line = at == std::string::npos ? "(no message in " + r.log.string() + ")" : line.substr(at + 16);
      return Verdict{Status::kDesync,
                     fmt::format("{}: {}. Code that runs a collective on some ranks only (an "
                                 "`if (group.rank() == 0)` around an all_reduce, a return before it) makes the "
                                 "others meet a different one. (rank {}, {})", what, line, r.rank, r.log.string())};
    }
  }
  for (const auto& r : launch.ranks) {
    if (r.signal) {
      return Verdict{Status::kCrash,
                     fmt::format("{}: rank {} crashed: killed by signal {} ({}) after {:.1f} s\n{}{}", what, r.rank,
                                 r.signal, strsignal(r.signal), r.seconds, last_words(r),
                                 how_others_ended(launch, r.rank))};
    }
  }
  for (const auto& r : launch.ranks) {
    if (r.exit_code == kExitInternal) {
      return Verdict{Status::kCrash, fmt::format("{}: rank {} crashed with an internal error (exit code 1)\n{}{}",
                                                 what, r.rank, last_words(r), how_others_ended(launch, r.rank))};
    }
  }
  for (const auto& r : launch.ranks) {
    if (r.killed) {
      bool others_failed = false;
      for (const auto& o : launch.ranks) others_failed |= !o.killed && o.exit_code != 0;
      return Verdict{Status::kHang,
                     fmt::format("{}: rank {} hung: still running after {:.0f} s{}, so it was killed. A rank "
                                 "that never reaches a collective (an endless loop, a sleep, a wait on the "
                                 "wrong rank) stops everyone\n{}{}",
                                 what, r.rank, r.seconds,
                                 others_failed ? ", after the other ranks had given up waiting for it" : "",
                                 last_words(r), how_others_ended(launch, r.rank))};
    }
  }
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
