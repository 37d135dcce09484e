// The training objective of the translation exercises: GPT-2's next-token cross-entropy on the
// target side only (the English tokens and <eos_en>), averaged over those tokens.
#pragma once

#include <torch/types.h>

#include <functional>

#include "dtlab/data/batch.h"
#include "dtlab/model/gpt2.h"

namespace dtlab::lm {

// sum(ce * w) / sum(w): ce[b, t] is the cross-entropy of logits[b, t] (vocab scores) against
// labels[b, t], w = weights[b, t] (0 or 1). logits [batch, seq, vocab], labels [batch, seq]
// int64, weights [batch, seq]. Labels are already shifted (label t is token t + 1), as
// make_lm_examples lays them out. A minibatch whose weights are all 0 gives 0.
torch::Tensor weighted_token_loss(const torch::Tensor& logits, const torch::Tensor& labels,
                                  const torch::Tensor& weights);

// The model's forward on a minibatch's input_ids and weighted_token_loss of its labels and
// label_weights: TrainState::loss.
std::function<torch::Tensor(const data::Batch&)> translation_loss(model::Gpt2LMHeadModel model);

}  // namespace dtlab::lm
