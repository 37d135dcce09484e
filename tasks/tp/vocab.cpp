// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
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
  // TODO(tp): round the vocabulary up to a multiple of TP; rank r holds the r-th of TP equal runs of ids.
  throw dtlab::NotImplemented("TODO(tp): round the vocabulary up to a multiple of TP; rank r holds the r-th of TP equal runs of ids.");
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
  // TODO(tp): look up the ids this rank holds (others read a valid row, then are zeroed, so they add nothing and get no gradient); g sums the ranks' lookups.
  throw dtlab::NotImplemented("TODO(tp): look up the ids this rank holds (others read a valid row, then are zeroed, so they add nothing and get no gradient); g sums the ranks' lookups.");
}

torch::Tensor VocabParallelCrossEntropy::forward(AutogradContext* ctx, const torch::Tensor& local_logits,
                                                 const torch::Tensor& targets, VocabShard shard, dist::Group* group,
                                                 std::string tag) {
  // TODO(tp): padding columns to -inf; the max over the group (MAX), the sum of exps after subtracting it (SUM), the target's logit from its owner (SUM); loss = log(sum) + max - target logit, 0 where ignored. Save the local softmax and where the target is for backward.
  throw dtlab::NotImplemented("TODO(tp): padding columns to -inf; the max over the group (MAX), the sum of exps after subtracting it (SUM), the target's logit from its owner (SUM); loss = log(sum) + max - target logit, 0 where ignored. Save the local softmax and where the target is for backward.");
}

variable_list VocabParallelCrossEntropy::backward(AutogradContext* ctx, variable_list grad_outputs) {
  // TODO(tp): softmax minus one-hot of the target on this rank's columns (the owner subtracts 1), each row times its loss's incoming gradient, ignored rows 0.
  throw dtlab::NotImplemented("TODO(tp): softmax minus one-hot of the target on this rank's columns (the owner subtracts 1), each row times its loss's incoming gradient, ignored rows 0.");
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
