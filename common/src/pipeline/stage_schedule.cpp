// The actions of one stage rank, see pipeline/stage_schedule.h.
#include "dtlab/pipeline/stage_schedule.h"

#include <fmt/core.h>

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

void check_schedule_arguments(const char* builder, int stage, int stages, int micro_batches) {
  if (stages < 1) throw Error(fmt::format("{}: stages is {}: a pipeline needs at least 1 stage", builder, stages));
  if (stage < 0 || stage >= stages) {
    throw Error(fmt::format("{}: stage is {}: the stages of a {}-stage pipeline are 0..{}", builder, stage, stages,
                            stages - 1));
  }
  if (micro_batches < 1) {
    throw Error(fmt::format("{}: micro_batches is {}: a step needs at least 1 micro-batch", builder, micro_batches));
  }
}

std::vector<StageSchedule> stage_schedules(const ScheduleBuilder& build, int stages, int micro_batches) {
  check_schedule_arguments("stage_schedules", 0, stages, micro_batches);
  std::vector<StageSchedule> per_stage;
  for (int s = 0; s < stages; ++s) per_stage.push_back(build(s, stages, micro_batches));
  return per_stage;
}

}  // namespace dtlab::pipeline
