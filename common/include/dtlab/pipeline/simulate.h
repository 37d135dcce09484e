// Runs the per-rank action lists of a pipeline (pipeline/stage_schedule.h) on a model of the
// ranks and the wire, without tensors: is every action there, does the pipeline finish or
// deadlock (and who waits for what), and what the schedule costs in time and stored
// activations. The grader runs students' lists through it before anything is sent.
//
// Note [Stage schedules]: the model.
//   * Stage s (a rank) runs its actions one at a time, in its list's order; n stages, m
//     micro-batches, numbered from 0. Positions in a list ("action 4") count from 0.
//   * F(i) on stage s > 0 receives micro-batch i's activation from stage s-1: it starts once
//     F(i) has finished on s-1 (plus the link's latency). F(i) on stage 0 needs nothing.
//   * B(i) on stage s < n-1 receives micro-batch i's gradient from stage s+1: it starts once
//     B(i) has finished on s+1 (plus the link's latency). B(i) on the last stage needs nothing
//     from another stage (the loss is computed there, at the end of its F(i)).
//   * B(i) also needs the activation its own F(i) stored, so F(i) must come earlier in the same
//     list. That is checked before the run, as an error of the schedule, not as a wait.
//   * Sends are asynchronous (isend): a stage never waits for its output to be received.
//     Receives block: a stage whose next action's input has not been sent waits, doing nothing.
//     The model hands each receive the message of its own micro-batch, wherever it stands in
//     the stream. c10d does not: it pairs a send with a receive by order (per pair of ranks and
//     direction), so lists whose neighbours send and receive in different micro-batch orders
//     are refused before they run, by check_message_order below, not here.
//   * Times: a forward takes costs.forward, a backward costs.backward, a message costs.link
//     from the end of the sender's action to the earliest start of the receiver's. Nothing
//     else takes time; an action starts at max(end of the stage's previous action, arrival).
//   * Stored activations: a forward's activation is stored from the end of the forward until
//     the end of its backward; peak_activations is the most a stage holds at once.
//   * A deadlock: no stage can start its next action, and some stage has actions left. Every
//     such stage waits for a neighbour that is itself waiting, so the waits form a cycle.
// The times are those of an event-by-event simulation: a stage's only resource is itself and
// sends never block, so each action's start depends only on actions that finished before it.
#pragma once

#include <string>
#include <vector>

#include "dtlab/pipeline/stage_schedule.h"

namespace dtlab::pipeline {

// How long things take, in any unit (the tests use forward 1, backward 2: a backward computes
// the gradients of both the input and the weights, about twice a forward's work).
struct SimulationCosts {
  double forward = 1.0;
  double backward = 2.0;
  double link = 0.0;  // from a send to when the receiver can start
};

// One action's run on its stage.
struct Interval {
  double start = 0, end = 0;
  Action action;
};

struct SimulationResult {
  bool completed = false;
  // Empty when completed; otherwise one line per stage left waiting, stage order, joined by
  // '\n', e.g. "stage 1 waits at action 4 (B2) for micro-batch 2's gradient from stage 2, which
  // waits at action 3 (F3) for micro-batch 3's activation from stage 1".
  std::string deadlock;
  // Per stage: the most activations stored at once (forwards finished whose backward has not).
  std::vector<int> peak_activations;
  // When the last action ends. With a deadlock, the measures cover the actions that ran.
  double makespan = 0;
  // Per stage, the actions that ran, in the order they ran (the list's order).
  std::vector<std::vector<Interval>> timeline;
  // 1 - (busy time of all stages) / (stages * makespan): the idle share; 0 when makespan is 0.
  double bubble_fraction = 0;
};

// Runs per_stage[s] as stage s's list, as Note [Stage schedules] says. Throws dtlab::Error,
// naming the stage, the position in its list and the action, unless every list has F(i) and
// B(i) exactly once for every i in 0..micro_batches-1, each B(i) after its F(i); also unless
// there is a stage, micro_batches >= 1 and every cost is finite and >= 0. Checked in that
// order: arguments, then per stage: out of range, twice, missing, backward before forward.
// A deadlock is not an error here: the result says completed = false and who waits for what.
SimulationResult simulate(const std::vector<StageSchedule>& per_stage, int micro_batches,
                          const SimulationCosts& costs = {});

// simulate(), then a dtlab::Error on a deadlock, one line: "the schedules of 3 stages for 4
// micro-batches deadlock after 7 of 24 actions: stage 0 waits ...; stage 1 waits ...".
// Returns the result otherwise (for the grader, which then checks peaks and bubble).
SimulationResult check_schedules(const std::vector<StageSchedule>& per_stage, int micro_batches,
                                 const SimulationCosts& costs = {});

// c10d pairs a send with a receive by order (per pair of ranks and direction), not by tag, so on
// every link the receiver must take the micro-batches in the order the sender sends them: stage
// s+1's forwards in stage s's forward order, stage s's backwards in stage s+1's backward order.
// Otherwise a forward would compute on another micro-batch's activation without an error. Throws
// dtlab::Error naming the two stages and both orders. (The simulation matches by tag and so
// cannot see this.)
void check_message_order(const std::vector<StageSchedule>& per_stage);

}  // namespace dtlab::pipeline
