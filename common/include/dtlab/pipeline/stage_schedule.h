// The vocabulary of a pipeline run as one process per stage: the ordered actions of
// one stage rank. The builders of GPipe's and 1F1B's lists are the pp exercise's
// (dtlab/tasks/pp.h): students write them. The schedule is data
// and the runtime executes it (picotron's idea), so a schedule can be checked and measured apart
// from the wire: see pipeline/simulate.h. Not here: send/recv, or any tensor.
//
// Unlike pipeline/schedule.h (clock ticks of (micro-batch, stage) tasks for one process with a
// worker per stage), a StageSchedule is what ONE rank runs, in order; ranks meet only through
// the activations and gradients they send each other.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace dtlab::pipeline {

enum class StageOp { kForward, kBackward };

// "forward" or "backward".
const char* stage_op_name(StageOp op);

// One action of a stage rank: its forward or its backward of micro-batch `micro` (from 0).
struct Action {
  StageOp op = StageOp::kForward;
  int micro = 0;
  bool operator==(const Action& other) const { return op == other.op && micro == other.micro; }
  bool operator!=(const Action& other) const { return !(*this == other); }
};

// "F3" or "B3": the short spelling, for timelines, tables and inside messages.
std::string label(const Action& action);

// "forward of micro-batch 3": the long spelling, for the sentence of a message.
std::string describe(const Action& action);

// The ordered actions of ONE stage rank. A pipeline of n stages has n of these.
using StageSchedule = std::vector<Action>;

// "F0 F1 B0 F2 B1 B2": the labels, space-separated (an empty list gives "").
std::string schedule_text(const StageSchedule& schedule);

enum class ScheduleKind { kGPipe, k1F1B };

// "gpipe" or "1f1b", the spelling parse_schedule_kind accepts.
const char* schedule_kind_name(ScheduleKind kind);

// "gpipe" or "1f1b" (exactly); anything else throws dtlab::Error naming the accepted values.
ScheduleKind parse_schedule_kind(const std::string& text);

// Throws dtlab::Error naming `builder` unless stages >= 1, 0 <= stage < stages and
// micro_batches >= 1: the arguments every schedule builder must refuse.
void check_schedule_arguments(const char* builder, int stage, int stages, int micro_batches);

// A schedule builder: stage s's list for a pipeline of `stages` stages and m micro-batches (the
// pp exercise's gpipe_schedule and one_f_one_b_schedule, dtlab/tasks/pp.h).
using ScheduleBuilder = std::function<StageSchedule(int stage, int stages, int micro_batches)>;

// Every stage's list from `build`, stage 0 first: what simulate() and check_schedules() take.
// Throws dtlab::Error for stages < 1 or micro_batches < 1 (a loop would return no lists).
std::vector<StageSchedule> stage_schedules(const ScheduleBuilder& build, int stages, int micro_batches);

}  // namespace dtlab::pipeline
