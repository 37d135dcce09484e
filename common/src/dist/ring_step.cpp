// One step of a ring (dtlab/dist/ring_step.h).
#include "dtlab/dist/ring_step.h"

namespace dtlab::dist {

void RingStep::wait() {
  recv.wait();
  send.wait();
}

RingStep ring_step_async(const torch::Tensor& out, torch::Tensor& in, Group& group, const std::string& tag) {
  const int world = group.size(), rank = group.rank();
  const int next = (rank + 1) % world, previous = (rank - 1 + world) % world;
  RingStep step;
  if (next == previous && rank > next) {
    step.recv = group.recv_async(in, previous, tag);
    step.send = group.send_async(out, next, tag);
  } else {
    step.send = group.send_async(out, next, tag);
    step.recv = group.recv_async(in, previous, tag);
  }
  return step;
}

}  // namespace dtlab::dist
