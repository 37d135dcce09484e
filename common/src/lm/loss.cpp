// The target-token loss, see lm/loss.h.
#include "dtlab/lm/loss.h"

#include <torch/nn/functional/loss.h>

#include <algorithm>
#include <utility>

namespace dtlab::lm {

namespace {

// sum(ce * w) and sum(w) over this minibatch's tokens.
std::pair<torch::Tensor, torch::Tensor> token_loss_sum(const torch::Tensor& logits, const torch::Tensor& labels,
                                                       const torch::Tensor& weights) {
  namespace F = torch::nn::functional;
  const int64_t vocab = logits.size(-1);
  const torch::Tensor ce = F::cross_entropy(logits.reshape({-1, vocab}), labels.reshape(-1),
                                            F::CrossEntropyFuncOptions().reduction(torch::kNone));
  const torch::Tensor w = weights.reshape(-1).to(ce.scalar_type());
  return {(ce * w).sum(), w.sum()};
}

}  // namespace

// How this relates to model::lm_loss (GPT2LMHeadModel's loss): lm_loss shifts by one itself
// and averages over every label that is not -100. With 0/1 weights, weighted_token_loss(logits,
// labels, w) equals lm_loss(logits, full) where `full` is the unshifted row (input_ids followed
// by the last label) with -100 wherever the next token does not count: the same tokens, the
// same mean. The weights are what the original exercise's collate produces; the test checks the
// equality.
torch::Tensor weighted_token_loss(const torch::Tensor& logits, const torch::Tensor& labels,
                                  const torch::Tensor& weights) {
  const auto [sum, count] = token_loss_sum(logits, labels, weights);
  // The weights are 0/1, so their sum is a token count: at least 1 whenever any token counts;
  // clamping it keeps a minibatch without target tokens at 0 instead of 0/0.
  return sum / count.clamp_min(1.0);
}

torch::Tensor data_parallel_token_loss(const torch::Tensor& logits, const torch::Tensor& labels,
                                       const torch::Tensor& weights, dist::Group& group) {
  const auto [sum, count] = token_loss_sum(logits, labels, weights);
  torch::Tensor total = count.detach().to(torch::kFloat64).reshape({1}).contiguous();
  group.all_reduce(total, dist::ReduceOp::SUM, "target tokens");
  const double tokens = std::max(1.0, total.item<double>());
  return sum * (double(group.size()) / tokens);
}

std::function<torch::Tensor(const data::Batch&)> translation_loss(model::Gpt2LMHeadModel model,
                                                                  dist::Group* group) {
  if (group && group->size() > 1) {
    return [model, group](const data::Batch& b) mutable {
      const torch::Tensor logits = model->forward(b.input_ids).logits;
      return data_parallel_token_loss(logits, b.labels, b.label_weights, *group);
    };
  }
  return [model](const data::Batch& b) mutable {
    // No attention mask: rows are padded on the right (Note [Padding columns] in lm/dataset.h).
    const torch::Tensor logits = model->forward(b.input_ids).logits;
    return weighted_token_loss(logits, b.labels, b.label_weights);
  };
}

}  // namespace dtlab::lm
