// cp, part 1 (dtlab/tasks/cp.h) with the reference: attention over blocks of keys against the
// attention this test computes itself in double precision, softmax over the whole row of masked
// scores, at lengths and blocks that do not divide each other, with the pieces of a longer
// sequence (offsets) and keys a query cannot see; its backward (the kit's autograd Function,
// dtlab/cp/block_attention.h) against autograd through that attention; the merge of pieces and
// each piece's share of the gradients; and the bytes it holds, linear in the block and not the
// T x T scores (the counting allocator, report/tensor_bytes.h). Its own program: the counting
// allocator replaces the process's CPU allocator for good.
#include <gtest/gtest.h>

#include <torch/autograd.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/cp/block_attention.h"
#include "dtlab/report/tensor_bytes.h"

namespace {

using dtlab::cp::Partial;
using dtlab::cp::Span;

constexpr double kInf = std::numeric_limits<double>::infinity();
// Note [The attention's tolerance]: the blocked attention in fp32 against this test's in double
// differs by rounding alone, within 1e-6 here (the largest difference each case prints). The
// algebra's mistakes move a value by far more, measured with the reference changed: a running sum
// not rescaled when the max grows moves outputs by up to 1.8 wherever a row spans several blocks;
// a mask that hides each query's own key leaves the first query with no key (lse -inf, not finite).
constexpr double kTolerance = 1e-5;

// Attention over the whole row, in double: softmax(scale q kᵀ masked) v and the log-sum-exp.
Partial naive(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale, const Span& span) {
  const torch::Tensor qd = q.to(torch::kDouble), kd = k.to(torch::kDouble), vd = v.to(torch::kDouble);
  torch::Tensor s = torch::matmul(qd, kd.transpose(-2, -1)) * scale;
  if (span.causal) {
    const torch::Tensor q_pos = torch::arange(span.q_start, span.q_start + q.size(2)).unsqueeze(1);
    const torch::Tensor k_pos = torch::arange(span.k_start, span.k_start + k.size(2)).unsqueeze(0);
    s = s.masked_fill(k_pos > q_pos, -kInf);
  }
  const torch::Tensor lse = torch::logsumexp(s, -1);
  // A row with no visible key: softmax would be NaN; its output is 0 by the contract.
  const torch::Tensor p = torch::where(torch::isinf(lse).unsqueeze(-1), torch::zeros_like(s),
                                       torch::exp(s - lse.unsqueeze(-1)));
  return {torch::matmul(p, vd), lse};
}

// The largest difference between two tensors of the same shape, where both are finite; and a
// failure if one is infinite where the other is not.
double largest_difference(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  const torch::Tensor g = got.to(torch::kDouble), w = want.to(torch::kDouble);
  EXPECT_EQ(g.sizes(), w.sizes()) << what;
  EXPECT_TRUE(torch::equal(torch::isinf(g), torch::isinf(w))) << what << ": infinite in different places";
  const torch::Tensor finite = torch::isfinite(w);
  EXPECT_TRUE(torch::equal(torch::isinf(g), g == -kInf)) << what << ": +inf";
  if (finite.sum().item<int64_t>() == 0) return 0;
  return (g.masked_select(finite) - w.masked_select(finite)).abs().max().item<double>();
}

void expect_close(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  const double diff = largest_difference(got, want, what);
  EXPECT_LE(diff, kTolerance) << what;
  std::printf("%-60s largest difference %.2e\n", what.c_str(), diff);
}

struct Inputs {
  torch::Tensor q, k, v;
};

Inputs random_inputs(int64_t queries, int64_t keys, int64_t seed, int64_t batch = 2, int64_t heads = 3,
                     int64_t head_dim = 8) {
  torch::manual_seed(seed);
  return {torch::randn({batch, heads, queries, head_dim}), torch::randn({batch, heads, keys, head_dim}),
          torch::randn({batch, heads, keys, head_dim})};
}

std::string describe(const Span& span, int64_t queries, int64_t keys, int64_t block) {
  return std::string(span.causal ? "causal" : "full") + " q " + std::to_string(span.q_start) + "+" +
         std::to_string(queries) + " k " + std::to_string(span.k_start) + "+" + std::to_string(keys) + " block " +
         std::to_string(block);
}

TEST(BlockAttention, EqualsTheWholeRowsSoftmaxAtBlocksThatDoNotDivideTheLength) {
  for (bool causal : {false, true}) {
    for (int64_t length : {1, 37}) {
      for (int64_t block : {1, 5, 8, 37, 64}) {
        const Inputs in = random_inputs(length, length, 7 + length + block);
        const Span span{0, 0, causal};
        const double scale = 1.0 / std::sqrt(8.0);
        const Partial got = dtlab::cp::block_attention(in.q, in.k, in.v, scale, span, block);
        const Partial want = naive(in.q, in.k, in.v, scale, span);
        const std::string what = describe(span, length, length, block);
        expect_close(got.out, want.out, what + ": out");
        expect_close(got.lse, want.lse, what + ": lse");
      }
    }
  }
}

// A chunk of queries against a chunk of keys of a longer sequence: before, overlapping, after.
TEST(BlockAttention, PiecesOfALongerSequenceUseTheirPositions) {
  const std::vector<Span> spans = {
      {24, 0, true},   // every key at or before the queries: nothing masked
      {10, 3, true},   // the diagonal inside the piece: some keys of each block masked
      {0, 20, true},   // every key after every query: lse -inf, out 0, nothing computed
      {5, 9, true},    // queries 5..17 against keys 9..45: the first four queries see no key
      {0, 20, false},  // the same pieces unmasked: positions do not matter
  };
  for (const Span& span : spans) {
    const Inputs in = random_inputs(13, 37, 100 + span.q_start + span.k_start);
    const Partial got = dtlab::cp::block_attention(in.q, in.k, in.v, 0.3, span, 6);
    const Partial want = naive(in.q, in.k, in.v, 0.3, span);
    const std::string what = describe(span, 13, 37, 6);
    expect_close(got.out, want.out, what + ": out");
    expect_close(got.lse, want.lse, what + ": lse");
  }
  // Every key after every query: the identity of the merge.
  const Inputs in = random_inputs(13, 37, 5);
  const Partial none = dtlab::cp::block_attention(in.q, in.k, in.v, 0.3, Span{0, 20, true}, 6);
  EXPECT_TRUE(torch::all(none.lse == -kInf).item<bool>());
  EXPECT_TRUE(torch::all(none.out == 0).item<bool>());
}

// The kit's autograd Function: block_attention forward, block_attention_backward from the saved
// output and log-sum-exp, against autograd through the attention in double.
TEST(BlockAttention, BackwardEqualsAutogradThroughTheWholeRow) {
  const std::vector<std::pair<Span, int64_t>> cases = {
      {{0, 0, true}, 5}, {{0, 0, false}, 8}, {{0, 0, true}, 37}, {{5, 9, true}, 4}, {{24, 0, true}, 7}};
  for (const auto& [span, block] : cases) {
    const int64_t queries = span.q_start == 0 && span.k_start == 0 ? 37 : 13;
    const Inputs in = random_inputs(queries, 37, 300 + block);
    const torch::Tensor dout = torch::randn(in.q.sizes());
    const double scale = 0.35;

    const torch::Tensor q = in.q.clone().requires_grad_(), k = in.k.clone().requires_grad_(),
                        v = in.v.clone().requires_grad_();
    (dtlab::cp::attention(q, k, v, scale, span, block) * dout).sum().backward();

    const torch::Tensor qd = in.q.to(torch::kDouble).requires_grad_(), kd = in.k.to(torch::kDouble).requires_grad_(),
                        vd = in.v.to(torch::kDouble).requires_grad_();
    (naive(qd, kd, vd, scale, span).out * dout.to(torch::kDouble)).sum().backward();

    const std::string what = describe(span, queries, 37, block);
    expect_close(q.grad(), qd.grad(), what + ": dq");
    expect_close(k.grad(), kd.grad(), what + ": dk");
    expect_close(v.grad(), vd.grad(), what + ": dv");
  }
}

// Ring attention's algebra: the keys cut in pieces (one of them after every query), each piece's
// partial merged in turn equals the whole; and the backward of each piece, given the whole's
// output and log-sum-exp, is that piece's share: dq summed over pieces, dk and dv the piece's rows.
TEST(BlockAttention, PiecesMergeToTheWholeAndTheirGradientsAreItsShares) {
  const int64_t queries = 19, keys = 41;
  const Span whole_span{11, 0, true};  // queries 11..29 against keys 0..40
  const Inputs in = random_inputs(queries, keys, 17);
  const double scale = 0.4;
  const Partial whole = dtlab::cp::block_attention(in.q, in.k, in.v, scale, whole_span, 6);
  const std::vector<std::pair<int64_t, int64_t>> pieces = {{0, 11}, {11, 12}, {23, 7}, {30, 11}};  // from, n

  Partial merged{torch::zeros_like(whole.out), torch::full_like(whole.lse, -kInf)};
  for (const auto& [from, n] : pieces) {
    const Span span{whole_span.q_start, from, true};
    const Partial piece = dtlab::cp::block_attention(in.q, in.k.narrow(2, from, n), in.v.narrow(2, from, n), scale,
                                                     span, 5);
    merged = dtlab::cp::merge_partials(merged, piece);
  }
  expect_close(merged.out, whole.out, "merged pieces: out");
  expect_close(merged.lse, whole.lse, "merged pieces: lse");
  // Merging in the other order gives the same (the merge is symmetric).
  const Partial swapped = dtlab::cp::merge_partials(
      dtlab::cp::block_attention(in.q, in.k.narrow(2, 11, 30), in.v.narrow(2, 11, 30), scale, Span{11, 11, true}, 5),
      dtlab::cp::block_attention(in.q, in.k.narrow(2, 0, 11), in.v.narrow(2, 0, 11), scale, Span{11, 0, true}, 5));
  expect_close(swapped.out, whole.out, "merged the other way: out");

  const torch::Tensor dout = torch::randn(whole.out.sizes());
  const dtlab::cp::Gradients all = dtlab::cp::block_attention_backward(in.q, in.k, in.v, whole.out, whole.lse, dout,
                                                                       scale, whole_span, 6);
  torch::Tensor dq = torch::zeros_like(in.q);
  for (const auto& [from, n] : pieces) {
    const dtlab::cp::Gradients g = dtlab::cp::block_attention_backward(
        in.q, in.k.narrow(2, from, n), in.v.narrow(2, from, n), whole.out, whole.lse, dout, scale,
        Span{whole_span.q_start, from, true}, 4);
    dq += g.dq;
    expect_close(g.dk, all.dk.narrow(2, from, n), "piece from " + std::to_string(from) + ": dk");
    expect_close(g.dv, all.dv.narrow(2, from, n), "piece from " + std::to_string(from) + ": dv");
  }
  expect_close(dq, all.dq, "pieces' dq summed");
}

// Note [The attention's bytes]: at T = 1024 the scores of the 2 heads are 8 MiB in fp32. The
// blocked forward and backward never hold a tensor larger than one block of scores for every head
// ([B, H, T, block]) or than an input ([B, H, T, D]), and what they hold at their peak above the
// inputs is about 6 inputs' worth (the output, the gradients, the running statistics) and 5 blocks'
// (at T = 512: 733,192 bytes at block 16, 1,716,232 at block 64, 4,096 bytes to a [1, 2, 512, 1]):
// linear in T and in the block. An attention that builds the scores holds all of them at once.
TEST(BlockAttention, HoldsBlocksOfScoresNeverTheWhole) {
  dtlab::report::TensorBytes& meter = dtlab::report::TensorBytes::install();
  const int64_t batch = 1, heads = 2, length = 1024, head_dim = 16;
  const int64_t scores = batch * heads * length * length * 4;
  const int64_t input = batch * heads * length * head_dim * 4;
  for (int64_t block : {16, 64}) {
    const Inputs in = random_inputs(length, length, 23, batch, heads, head_dim);
    const torch::Tensor q = in.q.clone().requires_grad_(), k = in.k.clone().requires_grad_(),
                        v = in.v.clone().requires_grad_();
    const torch::Tensor dout = torch::randn(in.q.sizes());
    const int64_t one_block = batch * heads * length * block * 4;
    const int64_t bound = 8 * input + 6 * one_block;
    ASSERT_LT(bound, scores) << "the sizes must tell a bound linear in the block from the scores";
    meter.reset_peak();
    meter.reset_largest();
    const int64_t before = meter.current();
    (dtlab::cp::attention(q, k, v, 0.25, Span{0, 0, true}, block) * dout).sum().backward();
    const int64_t peak = meter.peak() - before, largest = meter.largest();
    std::printf("block %3lld: largest tensor %lld bytes, peak above the inputs %lld bytes (bound %lld); "
                "all the scores %lld\n",
                static_cast<long long>(block), static_cast<long long>(largest), static_cast<long long>(peak),
                static_cast<long long>(bound), static_cast<long long>(scores));
    EXPECT_LE(largest, std::max(one_block, input)) << "block " << block;
    EXPECT_LE(peak, bound) << "block " << block;
  }
}

TEST(BlockAttention, ShapesThatDoNotFitAreNamed) {
  const Inputs in = random_inputs(4, 6, 1);
  try {
    dtlab::cp::attention(in.q, in.k, in.v.narrow(2, 0, 5), 1.0, Span{}, 2);
    FAIL() << "no error";
  } catch (const dtlab::Error& e) {
    EXPECT_NE(std::string(e.what()).find("v [2, 3, 5, 8]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dtlab::cp::attention(in.q, in.k, in.v, 1.0, Span{}, 0), dtlab::Error);
  EXPECT_THROW(dtlab::cp::attention(in.q.to(torch::kDouble), in.k, in.v, 1.0, Span{}, 2), dtlab::Error);
}

}  // namespace
