// The autograd Function around the student's ring attention (dtlab/cp/ring_attention.h).
#include "dtlab/cp/ring_attention.h"

#include <torch/autograd.h>

#include <string>

#include "dtlab/core/error.h"
#include "dtlab/cp/block_attention.h"
#include "dtlab/tp/saved_group.h"

namespace dtlab::cp {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct RingAttentionFunction : torch::autograd::Function<RingAttentionFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, double scale, bool causal, bool balanced, int64_t block,
                               dist::Group* group, RingCounts* counts) {
    Partial result = ring_attention_forward(q, k, v, scale, causal, balanced, block, *group, counts);
    ctx->save_for_backward({q, k, v, result.out, result.lse});
    tp::save_group(ctx, *group, "cp");
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["balanced"] = balanced;
    ctx->saved_data["block"] = block;
    return result.out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor dout = grad_outputs[0].contiguous();
    Gradients g = ring_attention_backward(saved[0], saved[1], saved[2], saved[3], saved[4], dout,
                                          ctx->saved_data["scale"].toDouble(), ctx->saved_data["causal"].toBool(),
                                          ctx->saved_data["balanced"].toBool(), ctx->saved_data["block"].toInt(),
                                          tp::saved_group(ctx), nullptr);
    variable_list grads(9);  // q, k, v, then six arguments that take no gradient
    grads[0] = g.dq;
    grads[1] = g.dk;
    grads[2] = g.dv;
    return grads;
  }
};

}  // namespace

torch::Tensor ring_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                             bool causal, bool balanced, int64_t block, dist::Group& group, RingCounts* counts) {
  check_attention_inputs(q, k, v, block);
  if (q.size(2) != k.size(2) || q.size(2) % 2 != 0) {
    throw Error("ring_attention: each rank holds two chunks of equal length of the queries, keys and values; got " +
                std::to_string(q.size(2)) + " queries and " + std::to_string(k.size(2)) + " keys");
  }
  return RingAttentionFunction::apply(q, k, v, scale, causal, balanced, block, &group, counts);
}

}  // namespace dtlab::cp
