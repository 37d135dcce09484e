// pp, the protocol: what a stage receives and sends around each action of its list
// (dtlab/tasks/pp.h).
#include <vector>

#include "dtlab/tasks/pp.h"

namespace dtlab::pp {

void run_stage(StageStep& step, const StageSchedule& schedule) {
  // BEGIN TODO(pp): for each action, receive its input from the neighbour (blocking), compute it, and send the result with send_async, keeping the PendingWork; wait for every send at the end.
  dist::Group& group = step.group();
  // Sends are posted, not waited for: a blocking send returns only once the receiver has posted
  // its receive, and in 1F1B's steady state stage s sends an activation forward while stage s+1
  // sends a gradient back, each before receiving the other's: both would wait for ever. Receives
  // block: the action cannot start without its input. The sent tensors stay alive in the works.
  std::vector<dist::PendingWork> sends;
  for (const Action& action : schedule) {
    const int i = action.micro;
    if (action.op == StageOp::kForward) {
      torch::Tensor input;
      if (!step.is_first()) {
        input = step.activation_buffer(i);
        group.recv(input, step.previous_rank(), StageStep::activation_tag(i));
      }
      const torch::Tensor output = step.forward(i, input);
      if (!step.is_last()) sends.push_back(group.send_async(output, step.next_rank(), StageStep::activation_tag(i)));
    } else {
      torch::Tensor output_grad;
      if (!step.is_last()) {
        output_grad = step.gradient_buffer(i);
        group.recv(output_grad, step.next_rank(), StageStep::gradient_tag(i));
      }
      const torch::Tensor input_grad = step.backward(i, output_grad);
      if (!step.is_first()) {
        sends.push_back(group.send_async(input_grad, step.previous_rank(), StageStep::gradient_tag(i)));
      }
    }
  }
  for (dist::PendingWork& send : sends) send.wait();
  // END TODO
}

}  // namespace dtlab::pp
