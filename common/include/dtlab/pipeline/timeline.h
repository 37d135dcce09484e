// What the stage workers did during one step: when each task ran, and the activation memory
// each stage held at most, with the measures a report plots (busy time, bubble). Not here: the
// plot itself.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <mutex>
#include <vector>

#include "dtlab/pipeline/schedule.h"

namespace dtlab::pipeline {

// One task's run on its worker, in seconds since the step's origin (StageWorkers: the first
// submit after construction or clear()).
struct StageEvent {
  int stage = 0;
  int micro = 0;
  Pass pass = Pass::kForward;
  double start = 0, end = 0;
};

// GPipe's bubble with m micro-batches over n equal stages, (n - 1) / (m + n - 1): the idle
// fraction of stages x span when every task takes the same time and nothing else does.
double ideal_bubble_fraction(int micro_batches, int stages);

// Thread-safe: workers append from their threads while the driver reads. Readers get copies.
class Timeline {
 public:
  explicit Timeline(int stages = 0);

  void append(const StageEvent& event);
  // A stage now holds `bytes` of recorded activations; the peak keeps the largest.
  void note_live_bytes(int stage, int64_t bytes);
  // Forgets every event and peak (a new step).
  void clear();

  int stages() const { return stages_; }
  std::vector<StageEvent> events() const;  // in the order they were appended
  double busy(int stage) const;            // sum of the stage's event durations, seconds
  double span() const;                     // first start to last end, seconds; 0 when empty
  // 1 - (busy time of all stages) / (stages x span): 0 when every stage worked all the time;
  // 0 for an empty timeline.
  double bubble_fraction() const;
  // The most bytes of recorded (input, output) activations the stage held at once this step.
  int64_t peak_bytes(int stage) const;

  // {"stages": n, "span": s, "bubble_fraction": f, "peak_bytes": [per stage],
  //  "events": [{"stage", "micro", "pass": "forward"|"backward", "start", "end"}, ...]},
  // times in seconds.
  nlohmann::json to_json() const;

 private:
  void check_stage(int stage) const;

  int stages_;
  mutable std::mutex mutex_;
  std::vector<StageEvent> events_;
  std::vector<int64_t> peak_bytes_;
};

}  // namespace dtlab::pipeline
