// pp, the protocol: what a stage receives and sends around each action of its list
// (dtlab/tasks/pp.h).
#include <utility>
#include <vector>

#include "dtlab/tasks/pp.h"

namespace dtlab::pp {

void run_stage(StageStep& step, const StageSchedule& schedule) {
  // BEGIN TODO(pp): for each action, receive its input from the neighbour, wait for the previous action's sends, compute it and send the result with send_async; after a backward whose next action is a forward, post that forward's receive before sending the gradient back; wait for the last sends at the end.
  dist::Group& group = step.group();
  // Sends are posted, not waited for at once: a blocking send returns only once the receiver has
  // posted its receive, and in 1F1B's steady state stage s sends an activation forward while
  // stage s+1 sends a gradient back, each before receiving the other's: both would wait for ever.
  // Receives block: the action cannot start without its input.
  //
  // A send keeps its tensor alive until it is waited for, so the sends of one action are waited
  // for at the start of the next, once that action's input has arrived: the stage then holds only
  // what its schedule stores (Note [Held, not only stored] in pipeline/stage_step.h). Waiting for
  // every send at the end instead would keep all m activations alive on stage 0, even in 1F1B.
  std::vector<dist::PendingWork> sends;
  const auto wait_for_sends = [&sends] {
    for (dist::PendingWork& send : sends) send.wait();
    sends.clear();  // a waited work still holds its tensor until it is destroyed
  };
  // On NCCL a pair's sends and receives run on one stream in the order they were posted (Note
  // [One stream per pair] in dist/p2p_order.h): stage s posts "send activation, receive gradient"
  // in 1F1B's steady state, so stage s+1 must post "receive activation, send gradient": after a
  // backward followed by a forward, it posts that forward's receive before sending the gradient.
  torch::Tensor next_input;      // that receive's buffer
  dist::PendingWork next_receive;
  int next_micro = -1;           // and its micro-batch
  for (size_t k = 0; k < schedule.size(); ++k) {
    const int i = schedule[k].micro;
    if (schedule[k].op == StageOp::kForward) {
      torch::Tensor input;
      if (next_micro == i) {
        next_receive.wait();
        input = std::move(next_input);  // not kept here past its backward
        next_micro = -1;
      } else if (!step.is_first()) {
        input = step.activation_buffer(i);
        group.recv(input, step.previous_rank(), StageStep::activation_tag(i));
      }
      wait_for_sends();
      const torch::Tensor output = step.forward(i, input);
      if (!step.is_last()) sends.push_back(group.send_async(output, step.next_rank(), StageStep::activation_tag(i)));
    } else {
      torch::Tensor output_grad;
      if (!step.is_last()) {
        output_grad = step.gradient_buffer(i);
        group.recv(output_grad, step.next_rank(), StageStep::gradient_tag(i));
      }
      wait_for_sends();
      const torch::Tensor input_grad = step.backward(i, output_grad);
      if (!step.is_first()) {
        if (k + 1 < schedule.size() && schedule[k + 1].op == StageOp::kForward) {
          next_micro = schedule[k + 1].micro;
          next_input = step.activation_buffer(next_micro);
          next_receive = group.recv_async(next_input, step.previous_rank(), StageStep::activation_tag(next_micro));
        }
        sends.push_back(group.send_async(input_grad, step.previous_rank(), StageStep::gradient_tag(i)));
      }
    }
  }
  wait_for_sends();
  // END TODO
}

}  // namespace dtlab::pp
