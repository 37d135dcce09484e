// Records and measures what the stage workers did, see pipeline/timeline.h.
#include "dtlab/pipeline/timeline.h"

#include <fmt/core.h>

#include <algorithm>

#include "dtlab/core/error.h"

namespace dtlab::pipeline {

double ideal_bubble_fraction(int micro_batches, int stages) {
  if (micro_batches < 1 || stages < 1) {
    throw Error(fmt::format("the ideal bubble needs at least 1 micro-batch and 1 stage, not {} and {}",
                            micro_batches, stages));
  }
  return static_cast<double>(stages - 1) / (micro_batches + stages - 1);
}

Timeline::Timeline(int stages) : stages_(stages), peak_bytes_(static_cast<size_t>(std::max(stages, 0)), 0) {
  if (stages < 0) throw Error(fmt::format("a timeline of {} stages", stages));
}

void Timeline::check_stage(int stage) const {
  if (stage < 0 || stage >= stages_) {
    throw Error(fmt::format("stage {} is not in this timeline of {} stages", stage, stages_));
  }
}

void Timeline::append(const StageEvent& event) {
  check_stage(event.stage);
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(event);
}

void Timeline::note_live_bytes(int stage, int64_t bytes) {
  check_stage(stage);
  std::lock_guard<std::mutex> lock(mutex_);
  peak_bytes_[stage] = std::max(peak_bytes_[stage], bytes);
}

void Timeline::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.clear();
  std::fill(peak_bytes_.begin(), peak_bytes_.end(), 0);
}

std::vector<StageEvent> Timeline::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

double Timeline::busy(int stage) const {
  check_stage(stage);
  std::lock_guard<std::mutex> lock(mutex_);
  double total = 0;
  for (const StageEvent& e : events_) {
    if (e.stage == stage) total += e.end - e.start;
  }
  return total;
}

double Timeline::span() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (events_.empty()) return 0;
  double first = events_.front().start, last = events_.front().end;
  for (const StageEvent& e : events_) {
    first = std::min(first, e.start);
    last = std::max(last, e.end);
  }
  return last - first;
}

double Timeline::bubble_fraction() const {
  const double s = span();
  if (s <= 0 || stages_ == 0) return 0;
  double total = 0;
  for (int stage = 0; stage < stages_; ++stage) total += busy(stage);
  return 1.0 - total / (stages_ * s);
}

int64_t Timeline::peak_bytes(int stage) const {
  check_stage(stage);
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_bytes_[stage];
}

nlohmann::json Timeline::to_json() const {
  nlohmann::json events = nlohmann::json::array();
  for (const StageEvent& e : this->events()) {
    events.push_back({{"stage", e.stage}, {"micro", e.micro}, {"pass", pass_name(e.pass)}, {"start", e.start},
                      {"end", e.end}});
  }
  std::vector<int64_t> peaks;
  for (int stage = 0; stage < stages_; ++stage) peaks.push_back(peak_bytes(stage));
  return {{"stages", stages_}, {"span", span()}, {"bubble_fraction", bubble_fraction()}, {"peak_bytes", peaks},
          {"events", events}};
}

}  // namespace dtlab::pipeline
