// One step of a ring over a group: send to the next rank (rank + 1) and receive from the previous
// one (rank - 1), both posted before either is waited for. A rank that waited for its send before
// posting its receive would wait for ever on a backend whose send completes only when the peer
// receives. With two ranks the next and the previous are one peer, and NCCL runs a pair's
// operations on one stream in the order posted: the higher rank posts its receive first, so that
// each send meets a receive (both sending first deadlocks above NCCL's buffer); Gloo matches them
// either way. zero's rings and cp's ring attention move their pieces with it.
#pragma once

#include <torch/types.h>

#include <string>

#include "dtlab/dist/group.h"

namespace dtlab::dist {

struct RingStep {
  PendingWork send, recv;
  // The receive, then the send; each at most the group's timeout.
  void wait();
};

// Posts the sending of `out` to the next rank and the receiving of `in` (the previous rank's
// `out`: same shape and dtype) from the previous one; neither is waited for.
RingStep ring_step_async(const torch::Tensor& out, torch::Tensor& in, Group& group, const std::string& tag = "");

}  // namespace dtlab::dist
