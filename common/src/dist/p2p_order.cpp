// Note [One stream per pair], see dist/p2p_order.h.
#include "dtlab/dist/p2p_order.h"

#include <fmt/format.h>

#include <algorithm>

#include "dtlab/core/error.h"

namespace dtlab::dist {
namespace {

// The point-to-point operations `rank` posted with `peer`, in the order it posted them.
std::vector<CommRecord> posted_with(const std::vector<CommRecord>& log, int peer) {
  std::vector<CommRecord> ops;
  for (const CommRecord& r : log) {
    if ((r.op == "send" || r.op == "recv") && r.peer == peer) ops.push_back(r);
  }
  std::sort(ops.begin(), ops.end(), [](const CommRecord& a, const CommRecord& b) { return a.sequence < b.sequence; });
  return ops;
}

std::string named(const CommRecord& r, int rank) {
  return fmt::format("rank {}: {} #{}{} {} rank {}", rank, r.op, r.sequence, r.tag.empty() ? "" : " (" + r.tag + ")",
                     r.op == "send" ? "to" : "from", r.peer);
}

}  // namespace

void check_stream_order(const std::vector<std::vector<CommRecord>>& logs) {
  const auto world = static_cast<int>(logs.size());
  for (int a = 0; a < world; ++a) {
    for (int b = a + 1; b < world; ++b) {
      const std::vector<CommRecord> mine = posted_with(logs[static_cast<size_t>(a)], b);
      const std::vector<CommRecord> theirs = posted_with(logs[static_cast<size_t>(b)], a);
      const size_t both = std::min(mine.size(), theirs.size());
      for (size_t k = 0; k < both; ++k) {
        if (mine[k].op != theirs[k].op) continue;
        throw Error(fmt::format(
            "ranks {} and {} each post a {} as their operation {} with each other ({}; {}): NCCL runs a pair's "
            "operations on one stream in this order, so each {} waits for a {} queued behind the other's (Note [One "
            "stream per pair] in dist/p2p_order.h); let the lower rank send first and the higher receive first, or "
            "batch them", a, b, mine[k].op, k + 1, named(mine[k], a), named(theirs[k], b), mine[k].op,
            mine[k].op == "send" ? "receive" : "send"));
      }
      if (mine.size() != theirs.size()) {
        const bool a_more = mine.size() > theirs.size();
        const CommRecord& extra = a_more ? mine[both] : theirs[both];
        const size_t more = std::max(mine.size(), theirs.size());
        throw Error(fmt::format("rank {} posted {} operation{} with rank {}, which posted {} with it: {} has no match",
                                a_more ? a : b, more, more == 1 ? "" : "s", a_more ? b : a, both,
                                named(extra, a_more ? a : b)));
      }
    }
  }
}

}  // namespace dtlab::dist
