// The kit's side of cp's part 1 (dtlab/tasks/cp.h): attention over blocks as an autograd Function
// whose forward is the student's block_attention and whose backward is the student's
// block_attention_backward, from what the forward saved: q, k, v, the output and the log-sum-exp
// (O(T) numbers per head beside the inputs), never the scores.
#pragma once

#include <torch/types.h>

#include <cstdint>

#include "dtlab/tasks/cp.h"

namespace dtlab::cp {

// softmax(scale * q kᵀ, masked by span) v, differentiable in q, k and v. q [B, H, Tq, D], k and v
// [B, H, Tk, D], fp32, on one device; block >= 1. A dtlab::Error naming the mismatch otherwise.
torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                        const Span& span, int64_t block);

// The shapes attention() accepts, checked; the same Error.
void check_attention_inputs(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t block);

}  // namespace dtlab::cp
