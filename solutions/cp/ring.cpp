// cp, part 2: ring attention over the context group (dtlab/tasks/cp.h).
#include <limits>
#include <string>

#include "dtlab/core/error.h"
#include "dtlab/dist/group.h"
#include "dtlab/dist/ring_step.h"
#include "dtlab/tasks/cp.h"

namespace dtlab::cp {
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
  if (balanced) return {rank, 2 * static_cast<int64_t>(ranks) - 1 - rank};
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
    const bool more = step + 1 < ranks;
    dist::RingStep transfer;
    if (more) {
      transfer = dist::ring_step_async(kv, incoming, group, "cp kv " + std::to_string(step));
      if (counts) counts->bytes_sent += bytes_of(kv);
    }
    const std::vector<int64_t> theirs = chunks_of_rank(owner, ranks, balanced);
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 2; ++j) {
        if (hidden_piece(causal, mine[i], theirs[j])) continue;
        const Span span{mine[i] * c, theirs[j] * c, causal};
        const Partial piece = block_attention(q.narrow(2, i * c, c), kv[0].narrow(2, j * c, c),
                                              kv[1].narrow(2, j * c, c), scale, span, block);
        partial[i] = merge_partials(partial[i], piece);
        if (counts) ++counts->pieces;
      }
    }
    if (more) {
      transfer.wait();
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
    if (ranks > 1) {
      gradients = dist::ring_step_async(sent, arrived, group, "cp dkv " + std::to_string(step));
      if (counts) counts->bytes_sent += bytes_of(sent);
    }
    if (more) {
      transfer.wait();
      std::swap(kv, incoming);
    }
  }
  home = sent;  // one rank: its own sum
  if (ranks > 1) {
    gradients.wait();
    home = arrived;
  }
  // END TODO
  return {dq, home[0], home[1]};
}

}  // namespace dtlab::cp
