// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
// cp, part 1: attention over blocks of keys with an online softmax (dtlab/tasks/cp.h).
#include "dtlab/tasks/cp.h"

#include <algorithm>
#include <limits>

#include "dtlab/core/error.h"

namespace dtlab::cp {
namespace {

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

// True where key j of the block (absolute position k_first + j) comes after query i (q_start + i):
// the scores the causal mask hides. [Tq, n]
torch::Tensor hidden_keys(int64_t queries, int64_t q_start, int64_t k_first, int64_t n) {
  const auto positions = torch::TensorOptions().dtype(torch::kLong);
  const torch::Tensor q_pos = torch::arange(q_start, q_start + queries, positions).unsqueeze(1);
  const torch::Tensor k_pos = torch::arange(k_first, k_first + n, positions).unsqueeze(0);
  return k_pos > q_pos;
}

// Whether every key of the block [k_first, k_first + n) comes after every query: the block is
// not computed. Keys only grow along k, so every later block is hidden too.
bool hidden_block(const Span& span, int64_t queries, int64_t k_first) {
  return span.causal && k_first > span.q_start + queries - 1;
}

// The block's scaled scores, masked where the causal mask hides a key (-inf). [B, H, Tq, n]
torch::Tensor block_scores(const torch::Tensor& q, const torch::Tensor& k_block, double scale, const Span& span,
                           int64_t k_first) {
  torch::Tensor s = torch::matmul(q, k_block.transpose(-2, -1)) * scale;
  const int64_t queries = q.size(2), n = k_block.size(2);
  // Only a block whose last key comes after the first query has anything to hide.
  if (span.causal && k_first + n - 1 > span.q_start) {
    s = s.masked_fill(hidden_keys(queries, span.q_start, k_first, n), kMinusInfinity);
  }
  return s;
}

}  // namespace

Partial block_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                        const Span& span, int64_t block) {
  const int64_t queries = q.size(2), keys = k.size(2);
  const auto row = q.options().dtype(torch::kFloat);
  torch::Tensor max = torch::full({q.size(0), q.size(1), queries}, kMinusInfinity, row);
  torch::Tensor sum = torch::zeros({q.size(0), q.size(1), queries}, row);
  torch::Tensor acc = torch::zeros_like(q);
  for (int64_t from = 0; from < keys; from += block) {
    const int64_t n = std::min(block, keys - from), k_first = span.k_start + from;
    if (hidden_block(span, queries, k_first)) break;
    const torch::Tensor s = block_scores(q, k.narrow(2, from, n), scale, span, k_first);
    // TODO(cp): the online softmax: raise the running max by this block's, rescale the running sum and output by exp(old max - new max), add this block's exp(s - max) and exp(s - max) v.
    throw dtlab::NotImplemented("TODO(cp): the online softmax: raise the running max by this block's, rescale the running sum and output by exp(old max - new max), add this block's exp(s - max) and exp(s - max) v.");
  }
  // TODO(cp): the output is the accumulated sum divided by the running sum; lse = max + log(sum); a query that saw no key (sum 0) has output 0 and lse -inf.
  throw dtlab::NotImplemented("TODO(cp): the output is the accumulated sum divided by the running sum; lse = max + log(sum); a query that saw no key (sum 0) has output 0 and lse -inf.");
}

Gradients block_attention_backward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   const torch::Tensor& out, const torch::Tensor& lse, const torch::Tensor& dout,
                                   double scale, const Span& span, int64_t block) {
  const int64_t queries = q.size(2), keys = k.size(2);
  torch::Tensor dq = torch::zeros_like(q), dk = torch::zeros_like(k), dv = torch::zeros_like(v);
  // TODO(cp): D = rowsum(dout * out), one number per query: the softmax's backward needs it for every block.
  throw dtlab::NotImplemented("TODO(cp): D = rowsum(dout * out), one number per query: the softmax's backward needs it for every block.");
  // A query that sees no key has lse -inf and every score of it -inf: shift by 0, p = 0.
  const torch::Tensor shift = lse.masked_fill(torch::isinf(lse), 0.0);
  for (int64_t from = 0; from < keys; from += block) {
    const int64_t n = std::min(block, keys - from), k_first = span.k_start + from;
    if (hidden_block(span, queries, k_first)) break;
    const torch::Tensor k_block = k.narrow(2, from, n), v_block = v.narrow(2, from, n);
    const torch::Tensor s = block_scores(q, k_block, scale, span, k_first);
    // TODO(cp): p = exp(s - lse) recomputed; dv += pᵀ dout; dp = dout vᵀ; ds = p (dp - D); dq += ds k scale; dk += dsᵀ q scale.
    throw dtlab::NotImplemented("TODO(cp): p = exp(s - lse) recomputed; dv += pᵀ dout; dp = dout vᵀ; ds = p (dp - D); dq += ds k scale; dk += dsᵀ q scale.");
  }
  return {dq, dk, dv};
}

Partial merge_partials(const Partial& a, const Partial& b) {
  // TODO(cp): lse = log(exp(lse_a) + exp(lse_b)); each output weighted by exp(its lse - lse); a query neither piece saw keeps lse -inf and output 0.
  throw dtlab::NotImplemented("TODO(cp): lse = log(exp(lse_a) + exp(lse_b)); each output weighted by exp(its lse - lse); a query neither piece saw keeps lse -inf and output 0.");
}

}  // namespace dtlab::cp
