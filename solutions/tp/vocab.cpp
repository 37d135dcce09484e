// tp, part 3: the vocabulary split over the ranks: the padded shards, the embedding lookup and
// the cross-entropy on the tied head's split logits (dtlab/tasks/tp.h).
#include <fmt/format.h>

#include <limits>

#include "dtlab/core/error.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/tasks/tp.h"
#include "dtlab/tp/saved_group.h"

namespace dtlab::tp {

VocabShard vocab_shard(int64_t vocab, int rank, int tp) {
  if (vocab <= 0 || tp <= 0 || rank < 0 || rank >= tp) {
    throw Error(fmt::format("vocab_shard: a vocabulary of {} at rank {} of a tensor-parallel group of {}", vocab,
                            rank, tp));
  }
  VocabShard shard;
  shard.vocab = vocab;
  // BEGIN TODO(tp): round the vocabulary up to a multiple of TP; rank r holds the r-th of TP equal runs of ids.
  shard.padded = (vocab + tp - 1) / tp * tp;
  shard.rows = shard.padded / tp;
  shard.start = rank * shard.rows;
  // END TODO
  return shard;
}

torch::Tensor vocab_parallel_embedding(const torch::Tensor& ids, const torch::Tensor& weight, const VocabShard& shard,
                                       dist::Group& group, const std::string& tag) {
  if (weight.size(0) != shard.rows) {
    throw Error(fmt::format("vocab_parallel_embedding: a weight shard of {} rows for a vocabulary shard of {}",
                            weight.size(0), shard.rows));
  }
  if (ids.numel() > 0 && (ids.min().item<int64_t>() < 0 || ids.max().item<int64_t>() >= shard.vocab)) {
    throw Error(fmt::format("vocab_parallel_embedding: ids must lie in [0, {}), got {} .. {}", shard.vocab,
                            ids.min().item<int64_t>(), ids.max().item<int64_t>()));
  }
  // BEGIN TODO(tp): look up the ids this rank holds (others read a valid row, then are zeroed, so they add nothing and get no gradient); g sums the ranks' lookups.
  const torch::Tensor outside = ids.lt(shard.start).logical_or(ids.ge(shard.end()));
  const torch::Tensor local = (ids - shard.start).masked_fill(outside, 0);
  const torch::Tensor rows = torch::embedding(weight, local).masked_fill(outside.unsqueeze(-1), 0.0);
  return reduce_from_tensor_parallel(rows, group, tag);
  // END TODO
}

torch::Tensor VocabParallelCrossEntropy::forward(AutogradContext* ctx, const torch::Tensor& local_logits,
                                                 const torch::Tensor& targets, VocabShard shard, dist::Group* group,
                                                 std::string tag) {
  // BEGIN TODO(tp): padding columns to -inf; the max over the group (MAX), the sum of exps after subtracting it (SUM), the target's logit from its owner (SUM); loss = log(sum) + max - target logit, 0 where ignored. Save the local softmax and where the target is for backward.
  const torch::TensorOptions longs = targets.options().dtype(torch::kLong);
  const torch::Tensor padding = torch::arange(shard.start, shard.end(), longs).ge(shard.vocab);
  const torch::Tensor logits =
      local_logits.masked_fill(padding, -std::numeric_limits<double>::infinity());

  // Every rank's max of its columns, then the max of those: the same shift on every rank, so
  // that the exps summed over the ranks share one scale.
  torch::Tensor max = std::get<0>(logits.max(-1)).contiguous();
  group->all_reduce(max, dist::ReduceOp::MAX, tag + " max");
  const torch::Tensor exps = (logits - max.unsqueeze(-1)).exp();
  torch::Tensor sum = exps.sum(-1);
  group->all_reduce(sum, dist::ReduceOp::SUM, tag + " sum of exps");

  // The target's logit lives on one rank; the others add 0. (Ignored targets, -100, are owned by
  // none.)
  const torch::Tensor owned = targets.ge(shard.start).logical_and(targets.lt(shard.end()));
  const torch::Tensor local_target = (targets - shard.start).masked_fill(owned.logical_not(), 0);
  torch::Tensor target_logit =
      logits.gather(-1, local_target.unsqueeze(-1)).squeeze(-1).masked_fill(owned.logical_not(), 0.0).contiguous();
  group->all_reduce(target_logit, dist::ReduceOp::SUM, tag + " target logit");

  const torch::Tensor ignored = targets.eq(model::kIgnoreIndex);
  ctx->save_for_backward({exps / sum.unsqueeze(-1), local_target, owned, ignored});
  return (sum.log() + max - target_logit).masked_fill(ignored, 0.0);
  // END TODO
}

variable_list VocabParallelCrossEntropy::backward(AutogradContext* ctx, variable_list grad_outputs) {
  // BEGIN TODO(tp): softmax minus one-hot of the target on this rank's columns (the owner subtracts 1), each row times its loss's incoming gradient, ignored rows 0.
  const variable_list saved = ctx->get_saved_variables();
  const torch::Tensor &softmax = saved[0], &local_target = saved[1], &owned = saved[2], &ignored = saved[3];
  torch::Tensor grad = softmax.clone();
  grad.scatter_add_(-1, local_target.unsqueeze(-1), owned.to(grad.scalar_type()).neg().unsqueeze(-1));
  const torch::Tensor scale = grad_outputs[0].masked_fill(ignored, 0.0);
  return {grad * scale.unsqueeze(-1), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  // END TODO
}

torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& local_logits, const torch::Tensor& targets,
                                           const VocabShard& shard, dist::Group& group, const std::string& tag) {
  if (local_logits.dim() != 2 || local_logits.size(1) != shard.rows || targets.dim() != 1 ||
      targets.size(0) != local_logits.size(0)) {
    throw Error(fmt::format("vocab_parallel_cross_entropy: logits [N, {}] and targets [N] expected, got [{}] and [{}]",
                            shard.rows, fmt::join(local_logits.sizes(), ", "), fmt::join(targets.sizes(), ", ")));
  }
  const torch::Tensor bad = targets.ne(model::kIgnoreIndex).logical_and(targets.lt(0).logical_or(targets.ge(shard.vocab)));
  if (bad.any().item<bool>()) {
    throw Error(fmt::format("vocab_parallel_cross_entropy: target {} is outside the vocabulary [0, {}) and is not {}",
                            targets.masked_select(bad)[0].item<int64_t>(), shard.vocab, model::kIgnoreIndex));
  }
  return VocabParallelCrossEntropy::apply(local_logits, targets, shard, &group, tag);
}

}  // namespace dtlab::tp
