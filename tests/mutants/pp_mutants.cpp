// Deliberately broken pp solutions, one per mistake students make, chosen at run time by
// DTLAB_MUTANT (unset: correct). pp_test and grader_mutants_test run them and expect the check
// that should catch each to fail with the right words. Test code: never part of a student release.
//   blocking_send     run_stage sends with the blocking send (and posts no receive early):
//                     1F1B deadlocks on the wire
//   warmup_grows      1F1B's warm-up is `stage` forwards: it grows down the pipeline and deadlocks
//   warmup_plus_one   1F1B's warm-up is stages - stage: no deadlock, one activation too many
//   lifo_last_stage   GPipe's last stage drains m-1..0: its gradients leave in another order than
//                     the stage before receives them (c10d pairs by order)
//   skip_last_backward GPipe's stage 0 never runs B(m-1): its gradients come up short
//   serial_stages     run_stage receives every activation before its first forward and every
//                     gradient before its first backward: right numbers, no overlap (GPipe;
//                     1F1B deadlocks)
//   forwarded_gradient a middle stage sends back the gradient it received instead of its input's
//                     (what step.backward returned): same shape, wrong numbers upstream
//   stage_1_killed    stage 1 is killed (SIGKILL) as its second step starts: the others must
//                     name it within the timeout
//   dropped_send      run_stage does not keep send_async's PendingWork: the kit must name the
//                     send at the rank's next operation (Note [A dropped PendingWork])
//   no_communication  run_stage never sends or receives: every forward is fed
//                     activation_buffer(i).zero_(), every backward gradient_buffer(i).zero_().
//                     Every action runs, in order, so counts and busy times look like a
//                     pipeline's; the timeline's causality must say it is not one
//   late_receive      run_stage receives each forward's activation only when that forward
//                     starts: right on Gloo, but in 1F1B's steady state both neighbours post a
//                     send first, which NCCL's one stream per pair cannot run (Note [One stream
//                     per pair])
//   sends_held_to_end run_stage waits for its sends only at the end of the step (the kit's
//                     reference before issue 35): right numbers, but stage 0 holds every
//                     activation alive in its sends, and 1F1B's bound is not held
//                     (Note [Held, not only stored])
#include <algorithm>
#include <csignal>
#include <map>
#include <cstdlib>
#include <string>
#include <vector>

#include "dtlab/tasks/pp.h"

namespace dtlab::pp {
namespace {

bool mutant(const char* name) {
  const char* m = std::getenv("DTLAB_MUTANT");
  return m && std::string(m) == name;
}

}  // namespace

StageSchedule gpipe_schedule(int stage, int stages, int micro_batches) {
  pipeline::check_schedule_arguments("gpipe_schedule", stage, stages, micro_batches);
  StageSchedule actions;
  for (int i = 0; i < micro_batches; ++i) actions.push_back({StageOp::kForward, i});
  const bool lifo = mutant("lifo_last_stage") && stage == stages - 1;
  for (int k = 0; k < micro_batches; ++k) {
    const int i = lifo ? micro_batches - 1 - k : k;
    if (mutant("skip_last_backward") && stage == 0 && i == micro_batches - 1) continue;
    actions.push_back({StageOp::kBackward, i});
  }
  return actions;
}

StageSchedule one_f_one_b_schedule(int stage, int stages, int micro_batches) {
  pipeline::check_schedule_arguments("one_f_one_b_schedule", stage, stages, micro_batches);
  int warmup = stages - stage - 1;
  if (mutant("warmup_grows")) warmup = stage;
  if (mutant("warmup_plus_one")) warmup = stages - stage;
  warmup = std::min(warmup, micro_batches);
  StageSchedule actions;
  int f = 0, b = 0;
  while (f < warmup) actions.push_back({StageOp::kForward, f++});
  while (f < micro_batches) {
    actions.push_back({StageOp::kForward, f++});
    actions.push_back({StageOp::kBackward, b++});
  }
  while (b < micro_batches) actions.push_back({StageOp::kBackward, b++});
  return actions;
}

void run_stage(StageStep& step, const StageSchedule& schedule) {
  dist::Group& group = step.group();
  static int calls = 0;
  if (mutant("stage_1_killed") && step.stage() == 1 && ++calls == 2) std::raise(SIGKILL);
  if (mutant("no_communication")) {
    // Every action runs, in the schedule's order, on zeros instead of its neighbour's message.
    for (const Action& a : schedule) {
      if (a.op == StageOp::kForward) {
        step.forward(a.micro, step.is_first() ? torch::Tensor() : step.activation_buffer(a.micro).zero_());
      } else {
        step.backward(a.micro, step.is_last() ? torch::Tensor() : step.gradient_buffer(a.micro).zero_());
      }
    }
    return;
  }
  // serial_stages: every input received up front, so no action starts before the neighbour's
  // whole phase is done.
  std::map<int, torch::Tensor> activations, gradients;
  if (mutant("serial_stages")) {
    for (const Action& a : schedule) {
      if (a.op == StageOp::kForward && !step.is_first()) {
        activations[a.micro] = step.activation_buffer(a.micro);
        group.recv(activations[a.micro], step.previous_rank(), StageStep::activation_tag(a.micro));
      }
    }
  }
  const bool blocking = mutant("blocking_send"), dropped = mutant("dropped_send"), held = mutant("sends_held_to_end");
  // The early receive of the reference (Note [One stream per pair]); the blocking sender writes
  // the plain loop without it, and serial_stages has received every activation already.
  const bool early_receive = !blocking && !mutant("serial_stages") && !mutant("late_receive");
  std::vector<dist::PendingWork> sends, kept_to_end;
  const auto send = [&](const torch::Tensor& t, int dst, const std::string& tag) {
    if (blocking) {
      group.send(t, dst, tag);
    } else if (dropped) {
      group.send_async(t, dst, tag);  // the PendingWork is destroyed here, never waited for
    } else {
      sends.push_back(group.send_async(t, dst, tag));
    }
  };
  const auto wait_for_sends = [&] {
    for (dist::PendingWork& w : sends) {
      if (held) {
        kept_to_end.push_back(std::move(w));  // each send's tensor stays alive to the end
      } else {
        w.wait();
      }
    }
    sends.clear();
  };
  torch::Tensor next_input;
  dist::PendingWork next_receive;
  int next_micro = -1;
  for (size_t k = 0; k < schedule.size(); ++k) {
    const int i = schedule[k].micro;
    if (schedule[k].op == StageOp::kForward) {
      torch::Tensor input;
      if (activations.count(i)) {
        input = activations[i];
      } else if (next_micro == i) {
        next_receive.wait();
        input = std::move(next_input);
        next_micro = -1;
      } else if (!step.is_first()) {
        input = step.activation_buffer(i);
        group.recv(input, step.previous_rank(), StageStep::activation_tag(i));
      }
      wait_for_sends();
      const torch::Tensor output = step.forward(i, input);
      if (!step.is_last()) send(output, step.next_rank(), StageStep::activation_tag(i));
    } else {
      if (mutant("serial_stages") && gradients.empty() && !step.is_last()) {
        for (const Action& a : schedule) {
          if (a.op != StageOp::kBackward) continue;
          gradients[a.micro] = step.gradient_buffer(a.micro);
          group.recv(gradients[a.micro], step.next_rank(), StageStep::gradient_tag(a.micro));
        }
      }
      torch::Tensor output_grad;
      if (gradients.count(i)) {
        output_grad = gradients[i];
      } else if (!step.is_last()) {
        output_grad = step.gradient_buffer(i);
        group.recv(output_grad, step.next_rank(), StageStep::gradient_tag(i));
      }
      wait_for_sends();
      const torch::Tensor input_grad = step.backward(i, output_grad);
      const bool forwarded = mutant("forwarded_gradient") && !step.is_last();
      if (!step.is_first()) {
        if (early_receive && k + 1 < schedule.size() && schedule[k + 1].op == StageOp::kForward) {
          next_micro = schedule[k + 1].micro;
          next_input = step.activation_buffer(next_micro);
          next_receive = group.recv_async(next_input, step.previous_rank(), StageStep::activation_tag(next_micro));
        }
        send(forwarded ? output_grad : input_grad, step.previous_rank(), StageStep::gradient_tag(i));
      }
    }
  }
  wait_for_sends();
  for (dist::PendingWork& w : kept_to_end) w.wait();
}

}  // namespace dtlab::pp
