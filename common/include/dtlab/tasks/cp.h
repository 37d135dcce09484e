// cp: context parallelism (ring attention) on GPT-2, part 1: attention computed over blocks of
// keys with an online softmax, FlashAttention-2's forward and backward (Dao 2023), in C++ over
// LibTorch's tensor operations. The contract between the kit and the student: solutions/cp/ is the
// reference; the kit's autograd Function (dtlab/cp/block_attention.h) calls these functions.
//
// Why: attention's scores are T x T per head. At T = 128k that is 64 GiB in fp32 for one head of
// one sequence, and every exercise before this one materialises them. Softmax over a row can be
// computed in pieces: keep the running max m and the running sum l of exp(s - m); when a new piece
// raises the max, rescale what was summed so far by exp(m_old - m_new). The output is the same
// sum of exp(s - m) v, rescaled the same way. So attention needs one block of scores at a time,
// [queries, block], and two numbers per query; and since the result carries its log-sum-exp
// (lse = m + log l), two results over different keys merge into the result over all of them. That
// merge is what lets each rank of a ring hold a chunk of the sequence (part 2).
//
// Shapes: q [batch, heads, Tq, head_dim]; k and v [batch, heads, Tk, head_dim]; fp32. Positions
// are absolute: query i of q is at span.q_start + i, key j of k at span.k_start + j, so a chunk of
// a longer sequence knows where it is. Under the causal mask a query sees the keys at or before
// its own position. A query that sees no key of a piece (a chunk of keys after it) has output 0
// and lse -inf there: the identity of the merge.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace dtlab::dist {
class Group;
}

namespace dtlab::cp {

struct Span {
  int64_t q_start = 0;  // the absolute position of q's first query
  int64_t k_start = 0;  // and of k's first key
  bool causal = true;
};

// The attention of some queries over some keys: the output, and each query's log-sum-exp of its
// scaled, masked scores over those keys.
struct Partial {
  torch::Tensor out;  // [batch, heads, Tq, head_dim]
  torch::Tensor lse;  // [batch, heads, Tq], fp32; -inf where the query sees none of the keys
};

// Part 1a. softmax(scale * q kᵀ, masked) v, over the keys in blocks of `block` (the last block may
// be shorter: `block` need not divide Tk), holding at most one [Tq, block] block of scores per
// batch and head at a time, never all of them. A block every query of which is masked out (under
// the causal mask, keys after the last query) is not computed.
Partial block_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                        const Span& span, int64_t block);

struct Gradients {
  torch::Tensor dq, dk, dv;
};

// Part 1b. The gradients of the loss with respect to q, k and v, given dout = d loss / d out,
// recomputing each block of scores from q and k: nothing of the forward's blocks is kept.
// `out` and `lse` are those of the queries' whole attention (over every key, the merge of every
// piece), so that exp(s - lse) is the final probability of each score: with them, the gradients
// of a piece over some keys are that piece's share of the whole's (what ring attention needs).
Gradients block_attention_backward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   const torch::Tensor& out, const torch::Tensor& lse, const torch::Tensor& dout,
                                   double scale, const Span& span, int64_t block);

// Part 1c. Two partials of the same queries over two disjoint sets of keys, merged: the partial
// over both sets, as if computed in one piece.
Partial merge_partials(const Partial& a, const Partial& b);

// Part 2: ring attention (Liu et al. 2023) over the context group of N ranks. The sequence of T
// tokens is cut into 2N chunks of c = T / 2N tokens; each rank holds two chunks' queries, keys and
// values ([B, H, 2c, D]: its first chunk, then its second). Each rank's keys and values travel once
// around the ring, from rank r to rank r + 1, so every rank meets every key; a rank computes its
// queries' partial over each chunk of keys it holds at that moment and merges it into theirs.

// Part 2a. The chunks rank `rank` of `ranks` holds, in order. Under the causal mask a query sees
// only the keys before it, so the work of a chunk's queries grows with its position: balanced,
// rank r holds chunks r and 2N - 1 - r (one early, one late: every rank computes the same number
// of (query chunk, key chunk) pieces); otherwise, contiguous, chunks 2r and 2r + 1 (the last rank
// computes about 4N - 1 pieces, the first 3).
std::vector<int64_t> chunks_of_rank(int rank, int ranks, bool balanced);

// What a ring call did on this rank (the kit's checks read it).
struct RingCounts {
  int64_t pieces = 0;      // (query chunk, key chunk) pieces computed; a piece whose keys all come
                           // after its queries (causal) is skipped, not counted
  int64_t bytes_sent = 0;  // bytes this rank sent to the next
};

// Part 2b. This rank's queries' attention over the whole sequence. q, k, v [B, H, 2c, D] hold the
// chunks chunks_of_rank(group.rank(), group.size(), balanced) names. N steps: at each, the keys
// and values held now (first this rank's own) are sent on to the next rank and the next ones'
// receive is posted before the pieces of this step are computed, so the transfer overlaps the
// compute; then both are waited for. Returns out [B, H, 2c, D] and lse [B, H, 2c].
Partial ring_attention_forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                               bool causal, bool balanced, int64_t block, dist::Group& group, RingCounts* counts);

// Part 2c. The gradients of this rank's q, k and v, from ring_attention_forward's out and lse and
// dout = d loss / d out. The keys and values travel the ring again; each rank adds its pieces'
// dk and dv for the keys it holds to what the ranks before it added, and passes the sum on with
// them; after N steps each chunk's dk and dv arrive home, at the rank that owns those keys.
Gradients ring_attention_backward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& out, const torch::Tensor& lse, const torch::Tensor& dout,
                                  double scale, bool causal, bool balanced, int64_t block, dist::Group& group,
                                  RingCounts* counts);

}  // namespace dtlab::cp
