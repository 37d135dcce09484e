// Whether the point-to-point operations two ranks posted to each other could run on NCCL, checked
// from their CommLogs; it runs nothing. Gloo cannot show the problem (its sends never block the
// caller), so tests and the pp exercise's instructors use this on Gloo runs to stand for NCCL.
//
// Note [One stream per pair]: c10d's ProcessGroupNCCL runs every send and receive between two
// ranks on one communicator and one CUDA stream per pair, in the order each rank posted them. A
// send larger than NCCL's p2p buffer (NCCL_BUFFSIZE, 4 MiB by default) does not finish until the
// peer's matching receive runs, and a receive does not finish until the peer's send runs. So if
// both ranks post a send first, each send waits for a receive queued behind the other's send, and
// both GPUs wait for ever; so too if both post a receive first. Gloo sends in the background and
// matches by peer and order only, so the same program completes there. What NCCL needs, at any
// size: the k-th operation rank a posted with rank b is a send exactly when the k-th operation b
// posted with a is a receive. Two ways to get it: order them (the lower rank sends first, the
// higher receives first), or batch them (torch's batch_isend_irecv: one NCCL group call, whose
// operations are matched together whatever their order).
#pragma once

#include <vector>

#include "dtlab/dist/group.h"

namespace dtlab::dist {

// logs[r]: rank r's CommLog records (any order: sorted here by sequence, the order r posted
// them). Throws dtlab::Error at the first pair whose operations NCCL could not pair, e.g.
//   "ranks 0 and 1 each post a send as their operation 1 with each other (rank 0: send #1
//    (tied embedding gradient) to rank 1; rank 1: send #1 (tied embedding gradient) to rank 0):
//    NCCL runs a pair's operations on one stream in this order, so each send waits for a receive
//    queued behind the other's send (Note [One stream per pair]); let the lower rank send first
//    and the higher receive first, or batch them"
// or where one rank posted more operations with the other than the other with it.
void check_stream_order(const std::vector<std::vector<CommRecord>>& logs);

}  // namespace dtlab::dist
