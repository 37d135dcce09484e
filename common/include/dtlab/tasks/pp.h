// pp: GPT-2 pipeline parallel across ranks: each rank holds one stage, activations and
// gradients travel between neighbouring ranks, and the schedule is GPipe's or 1F1B's
// (PipeDream-flush), as torch.distributed.pipelining and picotron run them. With more ranks than
// stages the pipelines are also data parallel (a grid: rank = pipeline * stages + stage).
//
// The contract between the kit and the student: tasks/pp/ implements what this header declares,
// solutions/pp/ is the reference. The driver (common/drivers/pp_main.cpp, pipeline/stage_ranks.h) runs, on
// every rank, every step:
//
//   micro-batches = the pipeline's minibatch cut into m (every stage reads the same rows)
//   lists = build(s, n, m) for every stage s    // yours; the kit simulates them before the
//                                               // first send (pipeline/simulate.h)
//   step  = this rank's StageStep (its layers, its neighbours, the shapes ahead)
//   run_stage(step, lists[my stage])            // yours: the actions and their messages
//   the tied embedding's gradient summed between the first and the last stage, each stage's
//   gradients averaged over its data-parallel group, clipped by the whole model's norm, AdamW
//   (the kit's)
//
// handouts/pp.md explains each TODO.
#pragma once

#include "dtlab/pipeline/stage_schedule.h"
#include "dtlab/pipeline/stage_step.h"

namespace dtlab::pp {

using pipeline::Action;
using pipeline::StageOp;
using pipeline::StageSchedule;
using pipeline::StageStep;

// Yours. GPipe (fill, then drain) for stage `stage` of `stages`, m = micro_batches: every
// forward F0..F(m-1), then every backward B0..B(m-1). The same list on every stage; each stage
// stores all m activations before its first backward. Refuses bad arguments with
// pipeline::check_schedule_arguments.
StageSchedule gpipe_schedule(int stage, int stages, int micro_batches);

// Yours. 1F1B (PipeDream-flush): a warm-up of w = min(stages - stage - 1, m) forwards, then one
// forward and one backward while forwards remain, then the last w backwards. Forwards and
// backwards each in micro-batch order. No stage stores more than min(stages - stage, m)
// activations, and no m >= 1, stages 1..8 deadlocks. Refuses bad arguments as gpipe_schedule.
StageSchedule one_f_one_b_schedule(int stage, int stages, int micro_batches);

// Yours. The protocol between neighbouring stages: runs `schedule`, this stage's list, in order.
//   forward i:  a stage other than the first receives micro-batch i's activation from the
//               previous stage (step.previous_rank()) into step.activation_buffer(i); then
//               step.forward(i, it); a stage other than the last sends the result to the next.
//   backward i: a stage other than the last receives the gradient of micro-batch i's output
//               from the next stage into step.gradient_buffer(i); then step.backward(i, it); a
//               stage other than the first sends the result back to the previous one.
// Messages go over step.group() and are tagged StageStep::activation_tag(i) or gradient_tag(i).
// c10d pairs a send with a receive by order, and a blocking send returns only once its receiver
// has posted the receive: sends must not block the schedule (1F1B's steady state has neighbours
// that each send before they receive). A send keeps its tensor alive until it is waited for: the
// sends of one action are waited for once the next action's input has arrived, so that the stage
// holds no more than its schedule stores (Note [Held, not only stored], pipeline/stage_step.h).
// On NCCL a pair's sends and receives run on one stream in posting order (Note [One stream per
// pair], dist/p2p_order.h): after a backward whose next action is a forward, the forward's
// receive is posted (recv_async) before the gradient is sent back, so that on each pair the
// earlier stage sends first and the later receives first. Every send has completed when
// run_stage returns.
void run_stage(StageStep& step, const StageSchedule& schedule);

}  // namespace dtlab::pp
