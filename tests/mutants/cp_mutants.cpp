// Deliberately broken cp solutions, one per mistake, chosen at run time by DTLAB_MUTANT (unset:
// correct, solutions/cp's code). grader_mutants_test grades each and expects the check that
// should catch it to fail with the right words; contiguous_chunks, waits_before_computing,
// whole_scores and sends_after_last_step are right in every number and miss the exercise's point
// (balance, overlap, memory, traffic).
// Test code: never part of a student release.
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include "dtlab/core/error.h"
#include "dtlab/dist/group.h"
#include "dtlab/dist/ring_step.h"
#include "dtlab/tasks/cp.h"

namespace dtlab::cp {
namespace {

bool mutant(const char* name) {
  const char* m = std::getenv("DTLAB_MUTANT");
  return m && std::string(m) == name;
}

}  // namespace

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
  if (span.causal && k_first + n - 1 > span.q_start && !mutant("diagonal_unmasked")) {
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
  if (mutant("whole_scores")) block = keys;  // one block of every key: the T x T scores at once
  for (int64_t from = 0; from < keys; from += block) {
    const int64_t n = std::min(block, keys - from), k_first = span.k_start + from;
    if (hidden_block(span, queries, k_first)) break;
    const torch::Tensor s = block_scores(q, k.narrow(2, from, n), scale, span, k_first);
    // BEGIN TODO(cp): the online softmax: raise the running max by this block's, rescale the running sum and output by exp(old max - new max), add this block's exp(s - max) and exp(s - max) v.
    const torch::Tensor new_max = torch::maximum(max, std::get<0>(s.max(-1)));
    // A query that has seen no key yet still has max -inf: shift by 0 there, so exp(-inf - 0) is
    // 0 rather than exp(-inf + inf), NaN.
    const torch::Tensor shift = torch::where(torch::isinf(new_max), torch::zeros_like(new_max), new_max);
    const torch::Tensor p = torch::exp(s - shift.unsqueeze(-1));
    const torch::Tensor rescale = torch::exp(max - shift);
    sum = (mutant("sum_not_rescaled") ? sum : sum * rescale) + p.sum(-1);
    acc = acc * rescale.unsqueeze(-1) + torch::matmul(p, v.narrow(2, from, n));
    max = new_max;
    // END TODO
  }
  // BEGIN TODO(cp): the output is the accumulated sum divided by the running sum; lse = max + log(sum); a query that saw no key (sum 0) has output 0 and lse -inf.
  const torch::Tensor seen = sum > 0;
  const torch::Tensor out = acc / torch::where(seen, sum, torch::ones_like(sum)).unsqueeze(-1);
  const torch::Tensor lse = torch::where(seen, max + torch::log(sum), torch::full_like(sum, kMinusInfinity));
  return {out, lse};
  // END TODO
}

Gradients block_attention_backward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   const torch::Tensor& out, const torch::Tensor& lse, const torch::Tensor& dout,
                                   double scale, const Span& span, int64_t block) {
  const int64_t queries = q.size(2), keys = k.size(2);
  torch::Tensor dq = torch::zeros_like(q), dk = torch::zeros_like(k), dv = torch::zeros_like(v);
  // BEGIN TODO(cp): D = rowsum(dout * out), one number per query: the softmax's backward needs it for every block.
  const torch::Tensor d = (dout * out).sum(-1);
  // END TODO
  // A query that sees no key has lse -inf and every score of it -inf: shift by 0, p = 0.
  const torch::Tensor shift = lse.masked_fill(torch::isinf(lse), 0.0);
  for (int64_t from = 0; from < keys; from += block) {
    const int64_t n = std::min(block, keys - from), k_first = span.k_start + from;
    if (hidden_block(span, queries, k_first)) break;
    const torch::Tensor k_block = k.narrow(2, from, n), v_block = v.narrow(2, from, n);
    const torch::Tensor s = block_scores(q, k_block, scale, span, k_first);
    // BEGIN TODO(cp): p = exp(s - lse) recomputed; dv += pᵀ dout; dp = dout vᵀ; ds = p (dp - D); dq += ds k scale; dk += dsᵀ q scale.
    const torch::Tensor p = torch::exp(s - shift.unsqueeze(-1));
    dv.narrow(2, from, n).add_(torch::matmul(p.transpose(-2, -1), dout));
    const torch::Tensor dp = torch::matmul(dout, v_block.transpose(-2, -1));
    const torch::Tensor ds = p * (dp - d.unsqueeze(-1));
    dq.add_(torch::matmul(ds, k_block), scale);
    dk.narrow(2, from, n).add_(torch::matmul(ds.transpose(-2, -1), q), scale);
    // END TODO
  }
  return {dq, dk, dv};
}

Partial merge_partials(const Partial& a, const Partial& b) {
  // BEGIN TODO(cp): lse = log(exp(lse_a) + exp(lse_b)); each output weighted by exp(its lse - lse); a query neither piece saw keeps lse -inf and output 0.
  const torch::Tensor lse = torch::logaddexp(a.lse, b.lse);
  const torch::Tensor shift = torch::where(torch::isinf(lse), torch::zeros_like(lse), lse);
  const torch::Tensor weight_a = torch::exp(a.lse - shift).unsqueeze(-1);
  const torch::Tensor weight_b = torch::exp(b.lse - shift).unsqueeze(-1);
  if (mutant("averaged_not_merged")) {
    // The mean of the two outputs where both pieces saw keys (a piece that saw none adds 0).
    const torch::Tensor both = torch::isfinite(a.lse) & torch::isfinite(b.lse);
    return {torch::where(both.unsqueeze(-1), (a.out + b.out) / 2, a.out + b.out), lse};
  }
  return {a.out * weight_a + b.out * weight_b, lse};
  // END TODO
}


namespace {

[[maybe_unused]] int64_t bytes_of(const torch::Tensor& t) {
  return t.numel() * static_cast<int64_t>(t.element_size());
}

// Whether a piece is skipped: under the causal mask, a key chunk after the query chunk holds no
// key any of its queries sees.
[[maybe_unused]] bool hidden_piece(bool causal, int64_t query_chunk, int64_t key_chunk) {
  return causal && key_chunk > query_chunk;
}

}  // namespace

std::vector<int64_t> chunks_of_rank(int rank, int ranks, bool balanced) {
  // BEGIN TODO(cp): balanced: chunks rank and 2N - 1 - rank; contiguous: chunks 2 rank and 2 rank + 1.
  if (balanced && !mutant("contiguous_chunks")) return {rank, 2 * static_cast<int64_t>(ranks) - 1 - rank};
  return {2 * static_cast<int64_t>(rank), 2 * static_cast<int64_t>(rank) + 1};
  // END TODO
}

Partial ring_attention_forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                               bool causal, bool balanced, int64_t block, dist::Group& group, RingCounts* counts) {
  const int ranks = group.size(), rank = group.rank();
  const int64_t c = q.size(2) / 2;
  const std::vector<int64_t> mine = chunks_of_rank(rank, ranks, balanced);
  // Each local query chunk's partial so far: nothing seen yet (output 0, lse -inf).
  Partial partial[2];
  for (int i = 0; i < 2; ++i) {
    partial[i] = {torch::zeros_like(q.narrow(2, i * c, c)),
                  torch::full({q.size(0), q.size(1), c}, -std::numeric_limits<double>::infinity(),
                              q.options().dtype(torch::kFloat))};
  }
  // Keys and values travel as one message.
  torch::Tensor kv = torch::stack({k, v}), incoming = torch::empty_like(kv);
  // BEGIN TODO(cp): N steps: post the exchange of the keys and values held now (send to the next rank, receive from the previous) before computing; compute and merge each piece this rank's query chunks see of the owner's key chunks (owner = rank - step); then wait for both and hold the received ones.
  for (int step = 0; step < ranks; ++step) {
    const int owner = (rank - step + ranks) % ranks;
    // sends_after_last_step: the keys go round once more, home again, and nobody reads them.
    const bool more = step + 1 < ranks || (mutant("sends_after_last_step") && ranks > 1);
    dist::RingStep transfer;
    if (more) {
      transfer = dist::ring_step_async(kv, incoming, group, "cp kv " + std::to_string(step));
      if (mutant("waits_before_computing")) transfer.wait();  // the transfer over before the compute
      if (counts) counts->bytes_sent += bytes_of(kv);
    }
    const std::vector<int64_t> theirs = chunks_of_rank(owner, ranks, balanced);
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 2; ++j) {
        if (hidden_piece(causal, mine[i], theirs[j])) continue;
        // positions_not_offset: each chunk's positions counted from 0, as if it were the sequence.
        const Span span = mutant("positions_not_offset") ? Span{i * c, j * c, causal}
                                                         : Span{mine[i] * c, theirs[j] * c, causal};
        const Partial piece = block_attention(q.narrow(2, i * c, c), kv[0].narrow(2, j * c, c),
                                              kv[1].narrow(2, j * c, c), scale, span, block);
        partial[i] = merge_partials(partial[i], piece);
        if (counts) ++counts->pieces;
      }
    }
    if (more) {
      if (!mutant("waits_before_computing")) transfer.wait();
      std::swap(kv, incoming);
    }
  }
  // END TODO
  return {torch::cat({partial[0].out, partial[1].out}, 2), torch::cat({partial[0].lse, partial[1].lse}, 2)};
}

Gradients ring_attention_backward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& out, const torch::Tensor& lse, const torch::Tensor& dout,
                                  double scale, bool causal, bool balanced, int64_t block, dist::Group& group,
                                  RingCounts* counts) {
  const int ranks = group.size(), rank = group.rank();
  [[maybe_unused]] const int64_t c = q.size(2) / 2;
  const std::vector<int64_t> mine = chunks_of_rank(rank, ranks, balanced);
  torch::Tensor dq = torch::zeros_like(q);
  torch::Tensor kv = torch::stack({k, v}), incoming = torch::empty_like(kv);
  // The dk and dv of the keys held at a step, [2, B, H, 2c, D]: what this rank adds (added), what
  // the ranks before it added (arrived), and the sum it passes on (sent, kept until its send is done).
  torch::Tensor arrived = torch::zeros_like(kv), sent;
  dist::RingStep gradients;
  torch::Tensor home;  // this rank's own keys' dk and dv, [2, B, H, 2c, D]
  torch::Tensor own;   // gradients_kept: what its own pieces gave its own keys, never sent
  // BEGIN TODO(cp): N steps as in forward; at each, add this rank's pieces' dq to its own and their dk and dv to the gradients that arrived with these keys (from the previous rank), and send the sum on to the next rank; after the last step the gradients that arrive are this rank's own keys' dk and dv.
  for (int step = 0; step < ranks; ++step) {
    const int owner = (rank - step + ranks) % ranks;
    const bool more = step + 1 < ranks;
    dist::RingStep transfer;
    if (more) {
      transfer = dist::ring_step_async(kv, incoming, group, "cp kv back " + std::to_string(step));
      if (counts) counts->bytes_sent += bytes_of(kv);
    }
    const std::vector<int64_t> theirs = chunks_of_rank(owner, ranks, balanced);
    torch::Tensor added = torch::zeros_like(kv);
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 2; ++j) {
        if (hidden_piece(causal, mine[i], theirs[j])) continue;
        const Span span{mine[i] * c, theirs[j] * c, causal};
        const Gradients g = block_attention_backward(
            q.narrow(2, i * c, c), kv[0].narrow(2, j * c, c), kv[1].narrow(2, j * c, c), out.narrow(2, i * c, c),
            lse.narrow(2, i * c, c), dout.narrow(2, i * c, c), scale, span, block);
        dq.narrow(2, i * c, c).add_(g.dq);
        added[0].narrow(2, j * c, c).add_(g.dk);
        added[1].narrow(2, j * c, c).add_(g.dv);
        if (counts) ++counts->pieces;
      }
    }
    // The gradients the previous rank added for these keys (none at step 0: they are this rank's own).
    if (gradients.recv.valid()) gradients.wait();  // and the last sum sent, before it is dropped
    sent = step > 0 ? added + arrived : added;
    if (step == 0) own = added;
    if (ranks > 1 && !mutant("gradients_kept")) {
      gradients = dist::ring_step_async(sent, arrived, group, "cp dkv " + std::to_string(step));
      if (counts) counts->bytes_sent += bytes_of(sent);
    }
    if (more) {
      transfer.wait();
      std::swap(kv, incoming);
    }
  }
  home = sent;  // one rank: its own sum
  if (mutant("gradients_kept")) return {dq, own[0], own[1]};  // never sent home
  if (ranks > 1) {
    gradients.wait();
    home = arrived;
  }
  // END TODO
  return {dq, home[0], home[1]};
}

}  // namespace dtlab::cp
