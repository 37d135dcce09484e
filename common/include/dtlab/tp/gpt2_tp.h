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
// c_attn.weight" compares with shard_of(name, one process's gradient). Not here: the key/value
// cache, attention masks, reorder_and_upcast_attn, an untied head.
//
// Note [Dropout of a split model]: GPT-2 drops out in four places. Three are outside the split:
// the embeddings' sum, and each block half's output after g (resid_pdrop), where every TP rank
// holds the same whole tensor; drawn from the same generator in the same order (the kit seeds it
// alike on every rank), the masks agree without a word between the ranks. One is inside: the
// attention's probabilities, [batch, heads, seq, seq], of which a rank holds its heads only.
// Megatron-LM draws that mask from a generator of each rank's own (its RNG tracker), so the ranks'
// masks differ, as they must, but no longer equal one process's: TP with dropout trains another
// model than TP 1. Here each rank draws the WHOLE mask, exactly as one process draws it (the same
// generator state, the same shape, model::dropout), and keeps its heads' part: the masks differ
// between the ranks and together are one process's, so TP with dropout equals one process
// exactly (tp_run_test, TensorParallel.WithDropoutEqualsOneProcessExactly). The price is TP times
// the random numbers drawn for that mask: at GPT-2 small's 1024 positions a rank draws 12 x 1024² numbers a row
// where Megatron's tracker draws 12 / TP x 1024², which is why Megatron does not do this.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <string>
#include <utility>
#include <vector>

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

// The model's parameters keep their Hugging Face names, with '/' for '.' (register_parameter
// refuses dots): the one mapping each way, from a Hugging Face name to the parameter's key and back.
std::string parameter_key(std::string hf_name);
std::string hf_name(std::string parameter_key);

class TensorParallelGpt2Impl : public torch::nn::Module {
 public:
  // Copies this rank's slices of `whole`'s weights (detached: a model of its own, whose
  // parameters are leaves). `group` is the TP group: its size is TP, its rank this rank's.
  TensorParallelGpt2Impl(const model::Gpt2LMHeadModel& whole, dist::Group& group);

  // input_ids [batch, seq] -> this rank's logits [batch, seq, vocab.rows] (padding columns
  // included: the loss masks them).
  torch::Tensor forward(const torch::Tensor& input_ids);

  // Note [Stages] of model/gpt2.h on the split model, for a pipeline whose stages are
  // tensor-parallel (the mesh): stage 0 the embeddings (input ids -> hidden, whole on every
  // rank), stage 1..n_layer block s - 1 (hidden -> hidden, whole), stage n_layer + 1 ln_f and the
  // head (hidden -> this rank's logits). forward() is these in order. Each stage's collectives
  // run over group(), so every rank of the tensor group must run the same stage at once.
  int64_t num_stages() const { return config_.n_layer + 2; }
  torch::Tensor forward_stage(int64_t stage, const torch::Tensor& x);
  // This rank's parameters that a stage uses, by their Hugging Face names, as
  // Gpt2LMHeadModel::stage_parameters lists them (the tied wte: the first and the last stage).
  std::vector<std::pair<std::string, torch::Tensor>> stage_parameters(int64_t stage) const;

  // model::lm_loss's shifted mean cross-entropy (labels -100 ignored) on the split logits, the
  // same value on every rank.
  torch::Tensor loss(const torch::Tensor& logits, const torch::Tensor& labels);

  const VocabShard& vocab() const { return vocab_; }
  dist::Group& group() const { return *group_; }
  const model::Gpt2Config& config() const { return config_; }

 private:
  torch::Tensor parameter(const std::string& name) const;
  torch::Tensor block(int64_t layer, const torch::Tensor& hidden);

  model::Gpt2Config config_;
  dist::Group* group_;
  VocabShard vocab_;
};
TORCH_MODULE(TensorParallelGpt2);

// The translation exercises' loss (lm/loss.h's weighted_token_loss) on split logits: the sum of
// the vocabulary-parallel cross-entropy over the tokens of weight 1, and their count. logits
// [batch, seq, vocab.rows] this rank's (model.forward), labels [batch, seq] already shifted,
// weights [batch, seq] 0 or 1. The sum is the same on every TP rank.
struct TokenLossSum {
  torch::Tensor sum;  // a scalar that backward starts from
  double tokens = 0;
};
TokenLossSum token_loss_sum(TensorParallelGpt2Impl& model, const torch::Tensor& logits, const torch::Tensor& labels,
                            const torch::Tensor& weights);

}  // namespace dtlab::tp
