// GPT-2 over a context group (cp/gpt2_cp.h): model/gpt2.cpp's forward, position by position,
// with the student's ring attention in every block.
#include "dtlab/cp/gpt2_cp.h"

#include <fmt/format.h>
#include <torch/nn/functional/padding.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "dtlab/core/error.h"
#include "dtlab/cp/ring_attention.h"
#include "dtlab/model/dropout.h"
#include "dtlab/tasks/cp.h"

namespace dtlab::cp {

SequenceSplit split_sequence(int64_t length, int rank, int ranks, bool balanced) {
  SequenceSplit s;
  s.length = length;
  const int64_t pieces = 2 * static_cast<int64_t>(ranks);
  s.padded = (length + pieces - 1) / pieces * pieces;
  s.chunk = s.padded / pieces;
  s.chunks = chunks_of_rank(rank, ranks, balanced);
  if (s.chunks.size() != 2 || s.chunks[0] == s.chunks[1] ||
      std::any_of(s.chunks.begin(), s.chunks.end(), [&](int64_t c) { return c < 0 || c >= pieces; })) {
    throw Error(fmt::format("chunks_of_rank({}, {}, {}) gave [{}]: each rank holds two different chunks of the 2 x {} "
                            "= {} (0 to {})",
                            rank, ranks, balanced, fmt::join(s.chunks, ", "), ranks, pieces, pieces - 1));
  }
  std::vector<int64_t> positions;
  for (const int64_t c : s.chunks) {
    for (int64_t t = 0; t < s.chunk; ++t) positions.push_back(c * s.chunk + t);
  }
  s.positions = torch::tensor(positions, torch::kLong);
  return s;
}

torch::Tensor local_positions(const torch::Tensor& x, const SequenceSplit& split, double fill) {
  torch::Tensor padded = x;
  if (split.padded > x.size(1)) {
    std::vector<int64_t> shape = x.sizes().vec();
    shape[1] = split.padded - x.size(1);
    padded = torch::cat({x, torch::full(shape, fill, x.options())}, 1);
  }
  return padded.index_select(1, split.positions.to(x.device()));
}

ContextParallelGpt2::ContextParallelGpt2(model::Gpt2LMHeadModel whole, dist::Group& context, int64_t block,
                                         bool balanced)
    : whole_(std::move(whole)), context_(&context), block_(block), balanced_(balanced) {
  if (block < 1) throw Error(fmt::format("--cp_block {}: a block holds at least one key", block));
  if (whole_->config().reorder_and_upcast_attn) {
    throw Error("the context-parallel GPT-2 computes attention in fp32 already: a config with "
                "reorder_and_upcast_attn is not one it reads");
  }
}

torch::Tensor ContextParallelGpt2::dropout(const torch::Tensor& x, double p, const SequenceSplit& split) const {
  if (!whole_->is_training() || p <= 0) return x;
  const torch::Tensor whole = model::dropout(torch::ones({x.size(0), split.length, x.size(2)}, x.options()), p, true);
  return x * local_positions(whole, split, 1.0);
}

torch::Tensor ContextParallelGpt2::block_forward(int64_t layer, const torch::Tensor& hidden,
                                                 const SequenceSplit& split) {
  const model::Gpt2Config& c = whole_->config();
  model::Gpt2Block b = whole_->transformer->block(layer);
  const int64_t batch = hidden.size(0), local = hidden.size(1), heads = c.n_head, head_dim = c.head_dim();
  const auto qkv = b->attn->c_attn(b->ln_1(hidden)).split(c.n_embd, /*dim=*/2);
  auto split_heads = [&](const torch::Tensor& x) {
    return x.view({batch, local, heads, head_dim}).permute({0, 2, 1, 3}).contiguous();
  };
  double scale = 1.0;  // model/gpt2.cpp's scores: 1/sqrt(head_dim), and 1/(layer + 1) if asked
  if (c.scale_attn_weights) scale /= std::sqrt(double(head_dim));
  if (c.scale_attn_by_inverse_layer_idx) scale /= double(layer + 1);
  const torch::Tensor attended = ring_attention(split_heads(qkv[0]), split_heads(qkv[1]), split_heads(qkv[2]), scale,
                                                /*causal=*/true, balanced_, block_, *context_);
  const torch::Tensor merged = attended.permute({0, 2, 1, 3}).contiguous().view({batch, local, c.n_embd});
  const torch::Tensor x = hidden + dropout(b->attn->c_proj(merged), c.resid_pdrop, split);
  const torch::Tensor inner = model::gelu_new(b->mlp->c_fc(b->ln_2(x)));
  return x + dropout(b->mlp->c_proj(inner), c.resid_pdrop, split);
}

torch::Tensor ContextParallelGpt2::forward(const torch::Tensor& input_ids, const SequenceSplit& split) {
  const model::Gpt2Config& c = whole_->config();
  if (split.padded > c.n_positions) {
    throw Error(fmt::format("rows of {} tokens, padded to {} for {} chunks, exceed n_positions {} of the model: use "
                            "shorter sequences (--max_length) or a --cp whose 2 x CP divides the length",
                            split.length, split.padded, 2 * context_->size(), c.n_positions));
  }
  const torch::Tensor ids = local_positions(input_ids, split, 0);
  const torch::Tensor positions = split.positions.to(input_ids.device());
  torch::Tensor hidden = whole_->transformer->wte(ids) + whole_->transformer->wpe(positions).unsqueeze(0);
  hidden = dropout(hidden, c.embd_pdrop, split);
  for (int64_t i = 0; i < c.n_layer; ++i) hidden = block_forward(i, hidden, split);
  return whole_->head(hidden);
}

}  // namespace dtlab::cp
