// The vocabulary of a pipeline schedule (which (micro-batch, stage) tasks run at each clock tick)
// and a checker for schedules. Not here: a function that builds GPipe's fill-drain schedule;
// that is the students' clock_cycles (CMU 11-868 hw4 problem 2).
#pragma once

#include <string>
#include <vector>

namespace dtlab::pipeline {

// One unit of pipeline work: stage `stage` applied to micro-batch `micro` (both from 0).
struct Task {
  int micro = 0;
  int stage = 0;
  bool operator==(const Task& other) const { return micro == other.micro && stage == other.stage; }
  bool operator!=(const Task& other) const { return !(*this == other); }
};

// schedule[k] is the list of tasks that run concurrently at clock tick k. A tick may be empty.
using Schedule = std::vector<std::vector<Task>>;

enum class Pass { kForward, kBackward };

// "forward" or "backward", for messages and the timeline's JSON.
const char* pass_name(Pass pass);

// "(micro-batch 2, stage 1)", the spelling every message of this folder uses.
std::string describe(const Task& task);

// GPipe's backward schedule from its forward one: tick k of the result is tick T-1-k of
// `forward` (T ticks), each tick's tasks kept in their order (so stages stay in the order the
// forward tick lists them; the order within a tick does not matter to check_schedule, since a
// tick's tasks are independent). Reversing a valid forward schedule gives a valid backward one:
// (i, j) ran forward before (i, j+1), so its backward runs after (i, j+1)'s.
Schedule reversed(const Schedule& forward);

// Throws dtlab::Error, naming the tick and the task, unless `schedule` runs every task
// (micro-batch 0..micro_batches-1, stage 0..stages-1) exactly once, each tick uses a stage at
// most once, and every task's dependency ran at an earlier tick:
//   forward:  (i, j-1) before (i, j)   (a stage's input is the previous stage's output)
//   backward: (i, j+1) before (i, j)   (a stage's output gradient is the next stage's input one)
// Checked in that order: counts, range, stage twice in a tick, duplicate, missing, dependency.
// An empty schedule is missing every task.
void check_schedule(const Schedule& schedule, int micro_batches, int stages, Pass pass);

}  // namespace dtlab::pipeline
