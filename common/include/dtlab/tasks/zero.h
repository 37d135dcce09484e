// zero: sharded data parallelism on GPT-2 (ZeRO, Rajbhandari et al. 2020), in C++ over the kit's
// process group. Every rank still computes on its own minibatch, as in dp; what changes is what
// each rank keeps. The contract between the kit and the student: tasks/zero/ implements what this
// header declares, solutions/zero/ is the reference; handouts/zero.md explains each TODO.
//
// The kit lays the model's parameters end to end in one flat buffer cut into world-size equal
// pieces (shard/flat_parameters.h, Note [Flat parameters]); rank r owns piece r. The driver runs,
// on every rank:
//
//   group = init_process_group(settings); model = GPT-2, rank 0's weights on every rank
//   flat  = FlatParameters(model, world)                // every parameter a view of flat.values()
//   optimiser = AdamW over this rank's piece only (shard/shard_optimizer.h)
//   strategy  = the student's Zero1                     // make_strategy below
//   every step: forward, loss, strategy.before_backward(), backward,
//               strategy.after_backward()   // this rank's piece of the averaged gradient is in
//                                           // the shard gradients
//               clip (the norm over every rank's piece), optimiser step on the piece,
//               strategy.after_update()     // every rank's model holds the updated weights
//
// Part 1, the collectives, as rings over send/recv (Gloo in LibTorch 1.13 has no reduce_scatter,
// and the ring is the lesson): all-reduce = reduce-scatter + all-gather, each moving (N-1)/N of
// the buffer out of every rank, 2(N-1)/N in all: task 4's formula.
// Part 2, ZeRO-1: the optimiser's two moments exist for 1/N of the model on each rank.
#pragma once

#include <torch/types.h>

#include <memory>
#include <string>

#include "dtlab/dist/group.h"
#include "dtlab/shard/flat_parameters.h"
#include "dtlab/shard/shard_step.h"

namespace dtlab::zero {

// flat: the same number of elements on every rank, a multiple of the world size, cut into
// size() equal pieces. Afterwards piece `rank` of this rank's flat holds the sum over ranks of
// their piece `rank`; the other pieces hold partial sums (scratch). In size()-1 steps around the
// ring: at each, a rank sends one piece to rank + 1, receives one from rank - 1 and adds it to its
// own copy of that piece. Every send and receive carries `tag` (the CommLog, timeouts).
void ring_reduce_scatter(torch::Tensor& flat, dist::Group& group, const std::string& tag);

// flat: as above, with piece `rank` of this rank's flat correct. Afterwards every rank's flat is
// the pieces of all ranks, each from its owner: size()-1 steps around the ring, each passing on
// the piece received at the step before.
void ring_all_gather(torch::Tensor& flat, dist::Group& group, const std::string& tag);

// ZeRO-1: gradients whole on every rank after backward, then reduce-scattered (and averaged)
// into this rank's piece; the updated pieces all-gathered into every replica.
std::unique_ptr<shard::ShardStrategy> make_zero1(const shard::ShardContext& context);

// ZeRO-2: each unit's gradient reduce-scattered (and averaged) as soon as backward has produced
// it (shard/unit_hooks.h calls back), then freed: no rank holds the whole model's gradient. The
// updated pieces all-gathered as in ZeRO-1.
std::unique_ptr<shard::ShardStrategy> make_zero2(const shard::ShardContext& context);

// FSDP (ZeRO-3): each unit's parameters sharded at rest (the kit keeps only this rank's piece,
// shard::keep_only_pieces), all-gathered just before a stage reads them and freed after, gathered
// again before the stage's backward, their gradient reduce-scattered as in ZeRO-2 and freed.
std::unique_ptr<shard::ShardStrategy> make_fsdp(const shard::ShardContext& context);

}  // namespace dtlab::zero
