// The autograd Function around the student's blockwise attention (dtlab/cp/block_attention.h).
#include "dtlab/cp/block_attention.h"

#include <torch/autograd.h>

#include <string>

#include "dtlab/core/error.h"
#include "dtlab/model/checkpoint.h"  // shape_string

namespace dtlab::cp {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::string shape(const torch::Tensor& t) { return model::shape_string(t.sizes()); }

struct BlockAttentionFunction : torch::autograd::Function<BlockAttentionFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, double scale, int64_t q_start, int64_t k_start, bool causal,
                               int64_t block) {
    const Span span{q_start, k_start, causal};
    Partial result = block_attention(q, k, v, scale, span, block);
    ctx->save_for_backward({q, k, v, result.out, result.lse});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["q_start"] = q_start;
    ctx->saved_data["k_start"] = k_start;
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["block"] = block;
    return result.out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const Span span{ctx->saved_data["q_start"].toInt(), ctx->saved_data["k_start"].toInt(),
                    ctx->saved_data["causal"].toBool()};
    const torch::Tensor dout = grad_outputs[0].contiguous();
    Gradients g = block_attention_backward(saved[0], saved[1], saved[2], saved[3], saved[4], dout,
                                           ctx->saved_data["scale"].toDouble(), span,
                                           ctx->saved_data["block"].toInt());
    variable_list grads(8);  // q, k, v, then five arguments that take no gradient
    grads[0] = g.dq;
    grads[1] = g.dk;
    grads[2] = g.dv;
    return grads;
  }
};

}  // namespace

void check_attention_inputs(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t block) {
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) {
    throw Error("attention: q, k and v must be [batch, heads, tokens, head_dim]; got q " + shape(q) + ", k " +
                shape(k) + ", v " + shape(v));
  }
  if (k.sizes() != v.sizes()) throw Error("attention: k " + shape(k) + " and v " + shape(v) + " differ");
  if (q.size(0) != k.size(0) || q.size(1) != k.size(1) || q.size(3) != k.size(3)) {
    throw Error("attention: q " + shape(q) + " and k " + shape(k) + " differ in batch, heads or head_dim");
  }
  if (q.scalar_type() != torch::kFloat || k.scalar_type() != torch::kFloat || v.scalar_type() != torch::kFloat) {
    throw Error("attention: q, k and v must be fp32");
  }
  if (block < 1) throw Error("attention: block must be at least 1, got " + std::to_string(block));
}

torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                        const Span& span, int64_t block) {
  check_attention_inputs(q, k, v, block);
  return BlockAttentionFunction::apply(q, k, v, scale, span.q_start, span.k_start, span.causal, block);
}

}  // namespace dtlab::cp
