// cp, part 2 (dtlab/tasks/cp.h) with the reference: ring attention on 2 and 3 thread ranks against
// one process's attention over the whole sequence (the blocked attention, which cp_attention_test
// holds to an attention in double), its output and the gradients of q, k and v, balanced and
// contiguous, causal and not, at a chunk length the block does not divide; the pieces each rank
// computes (equal under the balanced split) and the bytes each rank sends.
#include <gtest/gtest.h>

#include <torch/types.h>

#include <cmath>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "dist_test_util.h"
#include "dtlab/cp/block_attention.h"
#include "dtlab/cp/ring_attention.h"

namespace {

using dtlab::cp::RingCounts;
using dtlab::cp::Span;

constexpr double kTolerance = 1e-5;  // as cp_attention_test's (Note [The attention's tolerance])

struct Whole {
  torch::Tensor q, k, v, dout, out, dq, dk, dv;
};

Whole one_process(int64_t length, bool causal, double scale, int64_t block) {
  torch::manual_seed(41 + length);
  Whole w;
  w.q = torch::randn({1, 2, length, 8});
  w.k = torch::randn({1, 2, length, 8});
  w.v = torch::randn({1, 2, length, 8});
  w.dout = torch::randn({1, 2, length, 8});
  const torch::Tensor q = w.q.clone().requires_grad_(), k = w.k.clone().requires_grad_(),
                      v = w.v.clone().requires_grad_();
  const torch::Tensor out = dtlab::cp::attention(q, k, v, scale, Span{0, 0, causal}, block);
  (out * w.dout).sum().backward();
  w.out = out.detach();
  w.dq = q.grad();
  w.dk = k.grad();
  w.dv = v.grad();
  return w;
}

// A rank's two chunks of a [B, H, T, D] tensor, in its order.
torch::Tensor chunks_of(const torch::Tensor& t, const std::vector<int64_t>& chunks, int64_t c) {
  return torch::cat({t.narrow(2, chunks[0] * c, c), t.narrow(2, chunks[1] * c, c)}, 2);
}

struct RankResult {
  torch::Tensor out, dq, dk, dv;
  RingCounts counts;
};

double largest_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

void check_ring(int ranks, bool causal, bool balanced) {
  const int64_t c = 5, length = 2 * ranks * c, block = 3;
  const double scale = 0.35;
  const Whole w = one_process(length, causal, scale, block);
  std::vector<RankResult> results(ranks);
  std::mutex m;
  dtlab::test::run_ranks(ranks, [&](dtlab::dist::Group& group) {
    const std::vector<int64_t> chunks = dtlab::cp::chunks_of_rank(group.rank(), ranks, balanced);
    const torch::Tensor q = chunks_of(w.q, chunks, c).requires_grad_(), k = chunks_of(w.k, chunks, c).requires_grad_(),
                        v = chunks_of(w.v, chunks, c).requires_grad_();
    RankResult r;
    const torch::Tensor out = dtlab::cp::ring_attention(q, k, v, scale, causal, balanced, block, group, &r.counts);
    (out * chunks_of(w.dout, chunks, c)).sum().backward();
    r.out = out.detach();
    r.dq = q.grad();
    r.dk = k.grad();
    r.dv = v.grad();
    std::lock_guard<std::mutex> lock(m);
    results[group.rank()] = r;
  });
  const std::string what = std::to_string(ranks) + " ranks, " + (causal ? "causal" : "full") + ", " +
                           (balanced ? "balanced" : "contiguous");
  const int64_t kv_bytes = 2 * w.q.numel() / ranks * 4;  // a rank's keys and values
  for (int rank = 0; rank < ranks; ++rank) {
    SCOPED_TRACE(what + ", rank " + std::to_string(rank));
    const std::vector<int64_t> chunks = dtlab::cp::chunks_of_rank(rank, ranks, balanced);
    const RankResult& r = results[rank];
    const double out = largest_difference(r.out, chunks_of(w.out, chunks, c));
    const double dq = largest_difference(r.dq, chunks_of(w.dq, chunks, c));
    const double dk = largest_difference(r.dk, chunks_of(w.dk, chunks, c));
    const double dv = largest_difference(r.dv, chunks_of(w.dv, chunks, c));
    std::printf("%s, rank %d: out %.1e dq %.1e dk %.1e dv %.1e; %lld pieces, %lld bytes sent\n", what.c_str(), rank, out,
                dq, dk, dv, static_cast<long long>(r.counts.pieces), static_cast<long long>(r.counts.bytes_sent));
    EXPECT_LE(out, kTolerance);
    EXPECT_LE(dq, kTolerance);
    EXPECT_LE(dk, kTolerance);
    EXPECT_LE(dv, kTolerance);
    // Every piece under the full mask; under the causal one, a query chunk sees the key chunks at
    // or before it: 2N + 1 pieces on every rank when balanced, 4r + 3 on rank r when contiguous.
    const int64_t pieces = !causal ? 4 * ranks : balanced ? 2 * ranks + 1 : 4 * rank + 3;
    EXPECT_EQ(r.counts.pieces, pieces);
    // The forward sends its keys and values on N - 1 times.
    EXPECT_EQ(r.counts.bytes_sent, (ranks - 1) * kv_bytes);
  }
}

TEST(RingAttention, EqualsOneProcessBalancedAndContiguous) {
  for (int ranks : {2, 3}) {
    for (bool balanced : {true, false}) check_ring(ranks, /*causal=*/true, balanced);
  }
  check_ring(3, /*causal=*/false, /*balanced=*/true);
}

TEST(RingAttention, OneRankIsTheBlockedAttention) { check_ring(1, /*causal=*/true, /*balanced=*/true); }

TEST(RingAttention, ChunksOfEachRank) {
  EXPECT_EQ(dtlab::cp::chunks_of_rank(0, 4, true), (std::vector<int64_t>{0, 7}));
  EXPECT_EQ(dtlab::cp::chunks_of_rank(3, 4, true), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(dtlab::cp::chunks_of_rank(1, 4, false), (std::vector<int64_t>{2, 3}));
}

}  // namespace
