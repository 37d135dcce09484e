// The training objective of the translation exercises: GPT-2's next-token cross-entropy on the
// target side only (the English tokens and <eos_en>), averaged over those tokens.
//
// Note [Data-parallel loss]: averaged over which tokens? One process averages over the target
// tokens of its minibatch. R data-parallel ranks that each average over their own N_r tokens and
// then average their gradients get (1/R) sum_r (1/N_r) sum_{t in r} grad ce_t, which is the
// gradient of one process on the union of their minibatches only when every N_r is the same;
// translation pairs differ in length, so it almost never is (a rank of short sentences would
// weigh each of its tokens more). So a data-parallel rank all-reduces the count N = sum_r N_r
// first (one scalar per step) and its loss is R / N * sum_{t in r} ce_t: averaging the R ranks'
// gradients then gives (1/N) sum_t grad ce_t, exactly the union's, and the mean over ranks of
// the ranks' losses is the union's loss. Gradient averaging stays what students write (all_reduce,
// divide by the world size), as in DDP and in the original exercise.
#pragma once

#include <torch/types.h>

#include <functional>

#include "dtlab/data/batch.h"
#include "dtlab/dist/group.h"
#include "dtlab/model/gpt2.h"

namespace dtlab::lm {

// sum(ce * w) / sum(w): ce[b, t] is the cross-entropy of logits[b, t] (vocab scores) against
// labels[b, t], w = weights[b, t] (0 or 1). logits [batch, seq, vocab], labels [batch, seq]
// int64, weights [batch, seq]. Labels are already shifted (label t is token t + 1), as
// make_lm_examples lays them out. A minibatch whose weights are all 0 gives 0.
torch::Tensor weighted_token_loss(const torch::Tensor& logits, const torch::Tensor& labels,
                                  const torch::Tensor& weights);

// sum(ce * w) * R / N with N the sum of w over the R ranks of `group` (all-reduced, tagged
// "target tokens"): this rank's share of the union's mean loss, Note [Data-parallel loss]. Every
// rank must call it at the same step. All weights 0 on every rank gives 0.
torch::Tensor data_parallel_token_loss(const torch::Tensor& logits, const torch::Tensor& labels,
                                       const torch::Tensor& weights, dist::Group& group);

// The model's forward on a minibatch's input_ids and its target-token loss: TrainState::loss.
// With a group of more than one rank, data_parallel_token_loss; otherwise weighted_token_loss.
// The group must outlive the function.
std::function<torch::Tensor(const data::Batch&)> translation_loss(model::Gpt2LMHeadModel model,
                                                                  dist::Group* group = nullptr);

}  // namespace dtlab::lm
