// The actions of one stage rank and the reference GPipe and 1F1B lists, see
// pipeline/stage_schedule.h.
#include "dtlab/pipeline/stage_schedule.h"

#include <fmt/core.h>

#include <algorithm>

#include "dtlab/core/error.h"

namespace dtlab::pipeline {

const char* stage_op_name(StageOp op) { return op == StageOp::kForward ? "forward" : "backward"; }

std::string label(const Action& action) {
  return fmt::format("{}{}", action.op == StageOp::kForward ? 'F' : 'B', action.micro);
}

std::string describe(const Action& action) {
  return fmt::format("{} of micro-batch {}", stage_op_name(action.op), action.micro);
}

std::string schedule_text(const StageSchedule& schedule) {
  std::string text;
  for (const Action& action : schedule) {
    if (!text.empty()) text += ' ';
    text += label(action);
  }
  return text;
}

const char* schedule_kind_name(ScheduleKind kind) { return kind == ScheduleKind::kGPipe ? "gpipe" : "1f1b"; }

ScheduleKind parse_schedule_kind(const std::string& text) {
  if (text == "gpipe") return ScheduleKind::kGPipe;
  if (text == "1f1b") return ScheduleKind::k1F1B;
  throw Error(fmt::format("unknown pipeline schedule '{}': the accepted values are gpipe and 1f1b", text));
}

namespace stage_schedule_detail {

void check_arguments(const char* builder, int stage, int stages, int micro_batches) {
  if (stages < 1) throw Error(fmt::format("{}: stages is {}: a pipeline needs at least 1 stage", builder, stages));
  if (stage < 0 || stage >= stages) {
    throw Error(fmt::format("{}: stage is {}: the stages of a {}-stage pipeline are 0..{}", builder, stage, stages,
                            stages - 1));
  }
  if (micro_batches < 1) {
    throw Error(fmt::format("{}: micro_batches is {}: a step needs at least 1 micro-batch", builder, micro_batches));
  }
}

Action forward(int micro) { return {StageOp::kForward, micro}; }
Action backward(int micro) { return {StageOp::kBackward, micro}; }

}  // namespace stage_schedule_detail

StageSchedule gpipe_schedule(int stage, int stages, int micro_batches) {
  using stage_schedule_detail::backward;
  using stage_schedule_detail::forward;
  stage_schedule_detail::check_arguments("gpipe_schedule", stage, stages, micro_batches);
  StageSchedule actions;
  // Fill: every forward. Each stores its activation until its backward, so the stage holds m.
  for (int i = 0; i < micro_batches; ++i) actions.push_back(forward(i));
  // Drain: every backward, in the forwards' order. The last stage starts as soon as its forwards
  // are done; every other stage waits for the gradient of each micro-batch from the next.
  for (int i = 0; i < micro_batches; ++i) actions.push_back(backward(i));
  return actions;
}

StageSchedule one_f_one_b_schedule(int stage, int stages, int micro_batches) {
  using stage_schedule_detail::backward;
  using stage_schedule_detail::forward;
  stage_schedule_detail::check_arguments("one_f_one_b_schedule", stage, stages, micro_batches);
  StageSchedule actions;
  int next_forward = 0;   // the micro-batch of this stage's next forward
  int next_backward = 0;  // and of its next backward
  // Warm-up: as many forwards as there are stages after this one (all m when m is smaller), so
  // that the first gradient is on its way back when the warm-up ends. The last stage has none.
  const int warmup = std::min(stages - stage - 1, micro_batches);
  while (next_forward < warmup) actions.push_back(forward(next_forward++));
  // Steady state: one forward, then one backward (1F1B), while forwards remain. Each pair
  // stores one activation and frees one, so the stage never holds more than warmup + 1.
  while (next_forward < micro_batches) {
    actions.push_back(forward(next_forward++));
    actions.push_back(backward(next_backward++));
  }
  // Cool-down: the last `warmup` backwards, of the micro-batches still stored.
  while (next_backward < micro_batches) actions.push_back(backward(next_backward++));
  return actions;
}

StageSchedule stage_schedule(ScheduleKind kind, int stage, int stages, int micro_batches) {
  return kind == ScheduleKind::kGPipe ? gpipe_schedule(stage, stages, micro_batches)
                                      : one_f_one_b_schedule(stage, stages, micro_batches);
}

std::vector<StageSchedule> stage_schedules(ScheduleKind kind, int stages, int micro_batches) {
  // Checked here too: with stages < 1 the loop would return no schedules instead of an error.
  stage_schedule_detail::check_arguments("stage_schedules", 0, stages, micro_batches);
  std::vector<StageSchedule> per_stage;
  for (int s = 0; s < stages; ++s) per_stage.push_back(stage_schedule(kind, s, stages, micro_batches));
  return per_stage;
}

}  // namespace dtlab::pipeline
