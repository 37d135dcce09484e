// The kit's side of cp's part 2 (dtlab/tasks/cp.h): ring attention as an autograd Function whose
// forward is the student's ring_attention_forward and whose backward is the student's
// ring_attention_backward, from the saved q, k, v, output and log-sum-exp. The group is kept in
// the autograd context as tp keeps its own (Note [The group in an autograd context]).
#pragma once

#include <torch/types.h>

#include <cstdint>

#include "dtlab/tasks/cp.h"

namespace dtlab::cp {

// This rank's queries' attention over the whole sequence, differentiable in q, k and v: [B, H, 2c,
// D] each, the chunks chunks_of_rank(group.rank(), group.size(), balanced) names, fp32. counts,
// if given, receives the forward's pieces and bytes (the backward's are its own call's). The group
// must outlive the backward pass. A dtlab::Error naming the mismatch for shapes that do not fit.
torch::Tensor ring_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                             bool causal, bool balanced, int64_t block, dist::Group& group,
                             RingCounts* counts = nullptr);

}  // namespace dtlab::cp
