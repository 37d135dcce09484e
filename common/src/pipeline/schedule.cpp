// Checks pipeline schedules, see pipeline/schedule.h.
#include "dtlab/pipeline/schedule.h"

#include <fmt/core.h>

#include "dtlab/core/error.h"

namespace dtlab::pipeline {

const char* pass_name(Pass pass) { return pass == Pass::kForward ? "forward" : "backward"; }

std::string describe(const Task& task) {
  return fmt::format("(micro-batch {}, stage {})", task.micro, task.stage);
}

Schedule reversed(const Schedule& forward) { return Schedule(forward.rbegin(), forward.rend()); }

namespace schedule_check {

constexpr int kNotRun = -1;

std::string where(const char* pass, size_t tick) { return fmt::format("{} schedule, tick {}", pass, tick); }

}  // namespace schedule_check

void check_schedule(const Schedule& schedule, int micro_batches, int stages, Pass pass) {
  using schedule_check::kNotRun;
  using schedule_check::where;
  const char* name = pass_name(pass);
  if (micro_batches < 1 || stages < 1) {
    throw Error(fmt::format("a {} schedule needs at least 1 micro-batch and 1 stage, not {} and {}", name,
                            micro_batches, stages));
  }
  // tick_of[i * stages + j]: the tick that runs (i, j), or kNotRun.
  std::vector<int> tick_of(static_cast<size_t>(micro_batches) * stages, kNotRun);
  auto slot = [&](const Task& t) -> int& { return tick_of[static_cast<size_t>(t.micro) * stages + t.stage]; };
  for (size_t k = 0; k < schedule.size(); ++k) {
    std::vector<const Task*> stage_user(static_cast<size_t>(stages), nullptr);
    for (const Task& t : schedule[k]) {
      if (t.micro < 0 || t.micro >= micro_batches || t.stage < 0 || t.stage >= stages) {
        throw Error(fmt::format("{}: task {} is out of range: micro-batches are 0..{}, stages 0..{}",
                                where(name, k), describe(t), micro_batches - 1, stages - 1));
      }
      if (const Task* other = stage_user[t.stage]) {
        throw Error(fmt::format("{}: stage {} appears twice, in {} and {}: a stage runs one task per tick",
                                where(name, k), t.stage, describe(*other), describe(t)));
      }
      stage_user[t.stage] = &t;
      if (slot(t) != kNotRun) {
        throw Error(fmt::format("{}: task {} runs twice, at tick {} and tick {}", where(name, k), describe(t),
                                slot(t), k));
      }
      slot(t) = static_cast<int>(k);
    }
  }
  for (int i = 0; i < micro_batches; ++i) {
    for (int j = 0; j < stages; ++j) {
      if (slot({i, j}) == kNotRun) {
        throw Error(fmt::format("{} schedule of {} ticks: task {} is missing: no tick runs it", name,
                                schedule.size(), describe({i, j})));
      }
    }
  }
  const int step = pass == Pass::kForward ? -1 : +1;  // where a task's dependency lies
  for (size_t k = 0; k < schedule.size(); ++k) {
    for (const Task& t : schedule[k]) {
      const Task dependency{t.micro, t.stage + step};
      if (dependency.stage < 0 || dependency.stage >= stages) continue;
      if (slot(dependency) >= static_cast<int>(k)) {
        throw Error(fmt::format("{}: task {} needs {} to have run at an earlier tick, but that runs at tick {}",
                                where(name, k), describe(t), describe(dependency), slot(dependency)));
      }
    }
  }
}

}  // namespace dtlab::pipeline
