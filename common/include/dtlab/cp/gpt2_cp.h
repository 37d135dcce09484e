// GPT-2 with its sequence split over a context group (the cp exercise's kit side): every rank
// holds the whole model and two chunks of every sequence, and each block's attention is the
// student's ring attention (dtlab/cp/ring_attention.h) over the group. Everything else in GPT-2
// acts on one position at a time (the embeddings, the layer norms, the projections, the MLP), so
// a rank computes it for its own positions alone; only attention needs the others' keys.
//
// Note [A sequence in 2N chunks]: a batch's rows of T tokens are padded on the right to T', the
// next multiple of 2N, and cut into 2N chunks of c = T' / 2N; rank r holds the chunks
// chunks_of_rank(r, N, balanced) names (the student's), its positions in that order. Padding on
// the right changes nothing a real token computes (the causal mask hides later positions) and has
// label weight 0. Labels need nothing more: they are already shifted (label t is token t + 1,
// lm/loss.h), so the last position of a chunk predicts the first token of the next chunk from
// the label it holds, and no label crosses a chunk's edge.
//
// Note [Dropout of a split sequence]: one process draws each dropout mask for the whole [B, T, C]
// in one go; a rank draws the same whole mask and keeps its positions' rows, so that every rank's
// masks are one process's (as tp's ranks keep their heads' part of the attention's mask). The
// attention's own dropout (on its probabilities) is not applied: the blockwise attention never
// holds the probabilities (FlashAttention draws that mask inside its kernel), so cp's model is
// GPT-2 with attn_pdrop 0, and the banner says so when the config's is not 0.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "dtlab/dist/group.h"
#include "dtlab/model/gpt2.h"

namespace dtlab::cp {

// Where this rank's tokens lie in rows of `length` tokens (Note [A sequence in 2N chunks]).
struct SequenceSplit {
  int64_t length = 0;            // T: the batch's tokens per row
  int64_t padded = 0;            // T': T rounded up to 2N chunks
  int64_t chunk = 0;             // c = T' / 2N
  std::vector<int64_t> chunks;   // this rank's two, in order
  torch::Tensor positions;       // [2c] int64: the absolute positions it holds, in order
};

// A dtlab::Error when chunks_of_rank gives this rank anything but two distinct chunks of 0..2N-1.
SequenceSplit split_sequence(int64_t length, int rank, int ranks, bool balanced);

// x [B, T, ...] padded along dimension 1 to T' with `fill`, then this rank's positions: [B, 2c, ...].
torch::Tensor local_positions(const torch::Tensor& x, const SequenceSplit& split, double fill);

class ContextParallelGpt2 {
 public:
  // The whole model (every rank's the same) and this rank's context group, which must outlive
  // it. block: keys per block of the attention; balanced: chunks_of_rank's layout.
  ContextParallelGpt2(model::Gpt2LMHeadModel whole, dist::Group& context, int64_t block, bool balanced);

  // The logits of this rank's positions, [B, 2c, vocab], for input_ids [B, T] (the whole rows).
  torch::Tensor forward(const torch::Tensor& input_ids, const SequenceSplit& split);

  const model::Gpt2Config& config() const { return whole_->config(); }
  dist::Group& context() { return *context_; }
  int64_t block() const { return block_; }
  bool balanced() const { return balanced_; }

 private:
  torch::Tensor block_forward(int64_t layer, const torch::Tensor& hidden, const SequenceSplit& split);
  // Note [Dropout of a split sequence]: x [B, 2c, C] times this rank's rows of a whole mask.
  torch::Tensor dropout(const torch::Tensor& x, double p, const SequenceSplit& split) const;

  model::Gpt2LMHeadModel whole_;
  dist::Group* context_;
  int64_t block_;
  bool balanced_;
};

}  // namespace dtlab::cp
