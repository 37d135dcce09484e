// pp, the schedules: which forward and which backward each stage runs, in order
// (dtlab/tasks/pp.h).
#include <algorithm>

#include "dtlab/tasks/pp.h"

namespace dtlab::pp {

StageSchedule gpipe_schedule(int stage, int stages, int micro_batches) {
  // BEGIN TODO(pp): refuse bad arguments, then list every forward in micro-batch order, then every backward in the same order.
  pipeline::check_schedule_arguments("gpipe_schedule", stage, stages, micro_batches);
  StageSchedule actions;
  // Fill: every forward. Each stores its activation until its backward, so the stage holds m.
  for (int i = 0; i < micro_batches; ++i) actions.push_back({StageOp::kForward, i});
  // Drain: every backward, in the forwards' order. The last stage starts as soon as its forwards
  // are done; every other stage waits for the gradient of each micro-batch from the next.
  for (int i = 0; i < micro_batches; ++i) actions.push_back({StageOp::kBackward, i});
  return actions;
  // END TODO
}

StageSchedule one_f_one_b_schedule(int stage, int stages, int micro_batches) {
  // BEGIN TODO(pp): refuse bad arguments; a warm-up of min(stages - stage - 1, m) forwards, then one forward and one backward while forwards remain, then the remaining backwards.
  pipeline::check_schedule_arguments("one_f_one_b_schedule", stage, stages, micro_batches);
  StageSchedule actions;
  int next_forward = 0;   // the micro-batch of this stage's next forward
  int next_backward = 0;  // and of its next backward
  // Warm-up: as many forwards as there are stages after this one (all m when m is smaller).
  // Stage s's first backward (of micro-batch 0) can start only once micro-batch 0 has gone
  // forward through the n - s - 1 stages after it and its gradient has come back; s fills that
  // wait with the next forwards, which the stages after it need next. The warm-up shrinks by one
  // per stage, so before stage s blocks on the gradient of micro-batch k it has sent stage s+1
  // every activation s+1 runs before it sends that gradient: no deadlock. (A warm-up that grows
  // from one stage to the next deadlocks once m exceeds it.)
  const int warmup = std::min(stages - stage - 1, micro_batches);
  while (next_forward < warmup) actions.push_back({StageOp::kForward, next_forward++});
  // Steady state: one forward, then one backward, while forwards remain. Each pair stores one
  // activation and frees one, so the stage never holds more than warmup + 1 = stages - stage.
  while (next_forward < micro_batches) {
    actions.push_back({StageOp::kForward, next_forward++});
    actions.push_back({StageOp::kBackward, next_backward++});
  }
  // Cool-down: the backwards of the micro-batches still stored; it only frees.
  while (next_backward < micro_batches) actions.push_back({StageOp::kBackward, next_backward++});
  return actions;
  // END TODO
}

}  // namespace dtlab::pp
