// GPT-2 split over a tensor-parallel group, Megatron-style, built from the kit's GPT-2 (model/
// gpt2.h) and computed with the tp contract's operators (tasks/tp.h). Rank r of TP holds:
//
//   transformer.wte.weight          rows [start, start + rows) of wte padded to a multiple of TP
//                                   (zero rows past the vocabulary): the embedding AND the tied head
//   h.i.attn.c_attn.weight, .bias   the q, k and v columns of its heads (shard_gpt2_attention_columns)
//   h.i.attn.c_proj.weight          its heads' rows (the attention's output is split by heads)
//   h.i.mlp.c_fc.weight, .bias      columns [r, r+1) * inner / TP
//   h.i.mlp.c_proj.weight           the same rows
//   everything else                 whole: wpe, the layer norms, the row-parallel layers' biases
//
// Each block: ln_1 -> column-parallel c_attn -> attention of this rank's heads -> row-parallel
// c_proj (+ residual); ln_2 -> column-parallel c_fc -> gelu -> row-parallel c_proj (+ residual).
// The head is a column-parallel product with this rank's wte rows: logits split along the
// vocabulary, [batch, seq, rows], and the loss is the vocabulary-parallel cross-entropy.
//
// Parameters keep their Hugging Face names, so that a rank's gradient of "transformer.h.0.attn.
// c_attn.weight" compares with shard_of(name, one process's gradient). No dropout (a dropout
// inside the split would need Megatron's per-rank generators; outside it, the same mask on every
// rank): a config with any dropout probability above 0 is refused. Not here: the key/value cache,
// attention masks, reorder_and_upcast_attn, an untied head.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <string>

#include "dtlab/dist/group.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/tasks/tp.h"

namespace dtlab::tp {

// What rank `rank` of `tp` holds of the whole GPT-2 parameter `name` (a Hugging Face key) whose
// value is `whole`: a slice (a copy), or `whole` itself for a replicated parameter. Also used on
// gradients. A dtlab::Error when TP divides neither the heads nor the MLP width (naming both).
torch::Tensor shard_of(const std::string& name, const torch::Tensor& whole, const model::Gpt2Config& config,
                       int rank, int tp);

// True for the parameters every rank holds whole.
bool is_replicated(const std::string& name);

class TensorParallelGpt2Impl : public torch::nn::Module {
 public:
  // Copies this rank's slices of `whole`'s weights (detached: a model of its own, whose
  // parameters are leaves). `group` is the TP group: its size is TP, its rank this rank's.
  TensorParallelGpt2Impl(const model::Gpt2LMHeadModel& whole, dist::Group& group);

  // input_ids [batch, seq] -> this rank's logits [batch, seq, vocab.rows] (padding columns
  // included: the loss masks them).
  torch::Tensor forward(const torch::Tensor& input_ids);

  // model::lm_loss's shifted mean cross-entropy (labels -100 ignored) on the split logits, the
  // same value on every rank.
  torch::Tensor loss(const torch::Tensor& logits, const torch::Tensor& labels);

  const VocabShard& vocab() const { return vocab_; }
  const model::Gpt2Config& config() const { return config_; }

 private:
  torch::Tensor parameter(const std::string& name) const;
  torch::Tensor block(int64_t layer, const torch::Tensor& hidden);

  model::Gpt2Config config_;
  dist::Group* group_;
  VocabShard vocab_;
};
TORCH_MODULE(TensorParallelGpt2);

}  // namespace dtlab::tp
