// The vocabulary of a pipeline run as one process per stage: the ordered actions of
// one stage rank, and the reference builders of GPipe's and 1F1B's lists. The schedule is data
// and the runtime executes it (picotron's idea), so a schedule can be checked and measured apart
// from the wire: see pipeline/simulate.h. Not here: send/recv, or any tensor.
//
// Unlike pipeline/schedule.h (clock ticks of (micro-batch, stage) tasks for one process with a
// worker per stage), a StageSchedule is what ONE rank runs, in order; ranks meet only through
// the activations and gradients they send each other.
#pragma once

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

// GPipe (fill, then drain): every forward, micro-batch 0..m-1, then every backward, 0..m-1 (the
// order of torch.distributed.pipelining's ScheduleGPipe; m-1..0 on every stage works as well).
// The same list on every stage. A stage stores all m activations before its first backward.
// Throws dtlab::Error unless stages >= 1, 0 <= stage < stages and micro_batches >= 1.
StageSchedule gpipe_schedule(int stage, int stages, int micro_batches);

// 1F1B (PipeDream-flush): a warm-up of w = min(stages - stage - 1, m) forwards, then a steady
// state of one forward and one backward while forwards remain, then a cool-down of the last w
// backwards. Forwards and backwards each run in micro-batch order 0..m-1.
//
// Why the warm-up is stages - stage - 1: stage s's first backward (of micro-batch 0) can start
// only once micro-batch 0 has gone forward through the n - s - 1 stages after it and its
// gradient has come back; s fills that wait with the next forwards, which the stages after it
// will need next. It also keeps the pipeline deadlock-free: the warm-up shrinks by one per
// stage, so before stage s blocks on the gradient of micro-batch k it has already sent stage
// s+1 every activation that s+1 runs before it sends that gradient (F0..F(w(s+1)+k), and
// w(s+1) <= w(s)). A warm-up that grows from one stage to the next deadlocks once m > w(s) + 1.
//
// Why at most min(stages - stage, m) activations are stored: after the warm-up the stage holds
// w; each steady-state pair stores one (its forward) and then frees one (its backward), so the
// count peaks at w + 1 = stages - stage; the cool-down only frees. When m <= stages - stage - 1
// the warm-up is every forward, the peak is m. GPipe stores m on every stage.
// Throws dtlab::Error unless stages >= 1, 0 <= stage < stages and micro_batches >= 1.
StageSchedule one_f_one_b_schedule(int stage, int stages, int micro_batches);

// gpipe_schedule or one_f_one_b_schedule, as `kind` says.
StageSchedule stage_schedule(ScheduleKind kind, int stage, int stages, int micro_batches);

// Every stage's list, stage 0 first: what simulate() and check_schedules() take.
std::vector<StageSchedule> stage_schedules(ScheduleKind kind, int stages, int micro_batches);

}  // namespace dtlab::pipeline
