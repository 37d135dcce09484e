// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
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
  // TODO(cp): balanced: chunks rank and 2N - 1 - rank; contiguous: chunks 2 rank and 2 rank + 1.
  throw dtlab::NotImplemented("TODO(cp): balanced: chunks rank and 2N - 1 - rank; contiguous: chunks 2 rank and 2 rank + 1.");
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
  // TODO(cp): N steps: post the exchange of the keys and values held now (send to the next rank, receive from the previous) before computing; compute and merge each piece this rank's query chunks see of the owner's key chunks (owner = rank - step); then wait for both and hold the received ones.
  throw dtlab::NotImplemented("TODO(cp): N steps: post the exchange of the keys and values held now (send to the next rank, receive from the previous) before computing; compute and merge each piece this rank's query chunks see of the owner's key chunks (owner = rank - step); then wait for both and hold the received ones.");
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
  // TODO(cp): N steps as in forward; at each, add this rank's pieces' dq to its own and their dk and dv to the gradients that arrived with these keys (from the previous rank), and send the sum on to the next rank; after the last step the gradients that arrive are this rank's own keys' dk and dv.
  throw dtlab::NotImplemented("TODO(cp): N steps as in forward; at each, add this rank's pieces' dq to its own and their dk and dv to the gradients that arrived with these keys (from the previous rank), and send the sum on to the next rank; after the last step the gradients that arrive are this rank's own keys' dk and dv.");
  return {dq, home[0], home[1]};
}

}  // namespace dtlab::cp
