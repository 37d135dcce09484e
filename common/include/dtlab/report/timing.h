// Summaries of per-iteration times as the assignment asks for them: the first iteration is
// discarded (warm-up: allocation, thread start), the next ones averaged.
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

namespace dtlab::report {

constexpr size_t kTimedIterations = 40;   // iterations a timing covers, the first included
constexpr size_t kDiscardedIterations = 1;

struct TimingSummary {
  size_t count = 0;      // iterations averaged
  double mean = 0;       // seconds
  double stdev = 0;      // sample standard deviation, seconds
  double min = 0, max = 0;
};

// Summarises seconds[discard, discard + max_count - discard) (fewer if fewer were run).
TimingSummary summarize(const std::vector<double>& seconds, size_t max_count = kTimedIterations,
                        size_t discard = kDiscardedIterations);

// A monotonic stopwatch in seconds.
class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void restart() { start_ = std::chrono::steady_clock::now(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace dtlab::report
