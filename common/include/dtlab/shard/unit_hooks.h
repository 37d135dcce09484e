// When backward has finished a unit (Note [Shard units]): ZeRO-2 reduces a unit's gradient as soon
// as it exists and frees it, so that no rank ever holds the whole model's gradient. A post hook on
// every parameter's gradient accumulator (as the kit's DDP, Note [When a bucket is reduced])
// counts the unit's parameters; the last one calls ready(unit), in the thread that runs backward,
// while backward goes on to the units before it (backward finishes the last unit first).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dtlab/core/libtorch_compat.h"
#include "dtlab/shard/units.h"

namespace dtlab::shard {

class UnitGradientHooks {
 public:
  // units must outlive the hooks; ready is called once per unit and backward (none: the hooks only
  // measure, the kit's meter of what a strategy holds).
  UnitGradientHooks(std::vector<ShardUnit>& units, std::function<void(ShardUnit&)> ready);
  ~UnitGradientHooks();
  UnitGradientHooks(const UnitGradientHooks&) = delete;
  UnitGradientHooks& operator=(const UnitGradientHooks&) = delete;

  // Before each backward: every unit waits for all its parameters again.
  void arm();
  // After backward: the units whose every parameter did not get a gradient (their ready was not
  // called), by name; empty when backward reached every unit.
  std::vector<std::string> not_ready() const;
  // After backward: a dtlab::Error naming this rank and the units not_ready() lists, if any (their
  // pieces were never reduced, and the optimiser would step on stale gradients).
  void expect_every_unit_ready(int rank) const;
  // The most gradient bytes this rank held at once during the backwards so far, seen at every
  // hook: the parameters' gradients and the units' flat gradient buffers (before each ready and
  // after it). One process, or ZeRO-1, holds the whole model's; ZeRO-2 about two units'.
  // The kit's meter is registered before the student's hooks, so it sees each unit's gradients
  // before they are reduced, and any flat gradient left over at the next hook; the step samples it
  // once more after after_backward (ZeRO-1 flattens there).
  int64_t peak_gradient_bytes() const { return peak_bytes_; }
  // The most whole units' parameter bytes (FlatParameters with their values) seen at the same
  // samples: what an FSDP rank holds gathered while backward runs, which the forward's stage hooks
  // cannot see (a strategy that gathers every unit before backward holds the whole model there).
  int64_t peak_parameter_bytes() const { return peak_parameter_bytes_; }
  void sample();

 private:
  void accumulated(size_t unit);

  std::vector<ShardUnit>& units_;
  std::function<void(ShardUnit&)> ready_;
  std::vector<size_t> waiting_;  // per unit: parameters still to accumulate in this backward
  std::vector<compat::GradAccumulator> accumulators_;
  std::vector<uintptr_t> hook_keys_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  int64_t peak_bytes_ = 0;
  int64_t peak_parameter_bytes_ = 0;
};

}  // namespace dtlab::shard
