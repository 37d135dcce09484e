// Many tensors reduced in one collective: what every gradient average of the kit does (tp's data
// group, pp's stage replicas, cp's world, the mesh's data group). A model's gradients are many
// small tensors, and a collective's latency, not its bytes, dominates each: one message for all of
// them, as DDP's buckets and Megatron-LM's grad buffer make.
#pragma once

#include <torch/types.h>

#include <string>
#include <vector>

#include "dtlab/dist/group.h"

namespace dtlab::dist {

// Every tensor of `tensors` reduced in place over `group` by `op`: concatenated into one flat
// buffer per dtype (in the order given), one all_reduce of each buffer tagged `tag`, the results
// copied back. Every rank of the group calls it with the same shapes, dtypes and order. Runs
// without autograd; the tensors may be views (a gradient, a slice of one).
void all_reduce_tensors(const std::vector<torch::Tensor>& tensors, Group& group, ReduceOp op, const std::string& tag);

}  // namespace dtlab::dist
