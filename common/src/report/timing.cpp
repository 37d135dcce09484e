// Timing summaries, see report/timing.h.
#include "dtlab/report/timing.h"

#include <algorithm>
#include <cmath>

namespace dtlab::report {

TimingSummary summarize(const std::vector<double>& seconds, size_t max_count, size_t discard) {
  TimingSummary s;
  if (seconds.size() <= discard || max_count <= discard) return s;
  const auto begin = seconds.begin() + discard;
  const auto end = seconds.begin() + std::min(seconds.size(), max_count);
  s.count = static_cast<size_t>(end - begin);
  double sum = 0;
  for (auto it = begin; it != end; ++it) sum += *it;
  s.mean = sum / double(s.count);
  double squares = 0;
  for (auto it = begin; it != end; ++it) squares += (*it - s.mean) * (*it - s.mean);
  s.stdev = s.count > 1 ? std::sqrt(squares / double(s.count - 1)) : 0.0;
  s.min = *std::min_element(begin, end);
  s.max = *std::max_element(begin, end);
  return s;
}

}  // namespace dtlab::report
