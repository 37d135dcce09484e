// Deliberately broken tp solutions, one per mistake students make, chosen at run time by
// DTLAB_MUTANT (unset: correct, solutions/tp's code). grader_mutants_test grades each and expects
// the check that should catch it to fail with the right words. Test code: never part of a
// student release.
#include <fmt/format.h>

#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/tasks/tp.h"
#include "dtlab/tp/saved_group.h"

namespace dtlab::tp {
namespace {

bool mutant(const char* name) {
  const char* m = std::getenv("DTLAB_MUTANT");
  return m && std::string(m) == name;
}

}  // namespace

// f and g (solutions/tp/ops.cpp)

torch::Tensor CopyToTensorParallel::forward(AutogradContext* ctx, const torch::Tensor& x, dist::Group* group,
                                            std::string tag) {
  save_group(ctx, *group, tag);
  // The input itself: autograd gives the output its own identity (a view) and this node.
  return x;
}

variable_list CopyToTensorParallel::backward(AutogradContext* ctx, variable_list grad_outputs) {
  torch::Tensor grad = grad_outputs[0].clone(at::MemoryFormat::Contiguous);  // all_reduce works in place
  saved_group(ctx).all_reduce(grad, dist::ReduceOp::SUM, saved_tag(ctx));
  return {grad, torch::Tensor(), torch::Tensor()};
}

torch::Tensor ReduceFromTensorParallel::forward(AutogradContext* ctx, const torch::Tensor& x, dist::Group* group,
                                                std::string tag) {
  torch::Tensor sum = x.clone(at::MemoryFormat::Contiguous);
  group->all_reduce(sum, dist::ReduceOp::SUM, tag);
  return sum;
}

variable_list ReduceFromTensorParallel::backward(AutogradContext* ctx, variable_list grad_outputs) {
  return {grad_outputs[0], torch::Tensor(), torch::Tensor()};
}

torch::Tensor copy_to_tensor_parallel(const torch::Tensor& x, dist::Group& group, const std::string& tag) {
  return CopyToTensorParallel::apply(x, &group, tag);
}

torch::Tensor reduce_from_tensor_parallel(const torch::Tensor& x, dist::Group& group, const std::string& tag) {
  return ReduceFromTensorParallel::apply(x, &group, tag);
}

// The layers (solutions/tp/layers.cpp)

torch::Tensor column_parallel_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                     dist::Group& group, const std::string& tag) {
  if (x.size(-1) != weight.size(0)) {
    throw Error(fmt::format("column_parallel_linear: input of width {} against a weight shard of {} rows",
                            x.size(-1), weight.size(0)));
  }
  // f_g_swapped: the column-parallel input through g, the row-parallel output through f.
  const torch::Tensor in = mutant("f_g_swapped") ? reduce_from_tensor_parallel(x, group, tag)
                                                 : copy_to_tensor_parallel(x, group, tag);
  const torch::Tensor y = torch::matmul(in, weight);
  return bias.defined() ? y + bias : y;
}

torch::Tensor row_parallel_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                  dist::Group& group, const std::string& tag) {
  if (x.size(-1) != weight.size(0)) {
    throw Error(fmt::format("row_parallel_linear: input of width {} against a weight shard of {} rows",
                            x.size(-1), weight.size(0)));
  }
  const torch::Tensor local = torch::matmul(x, weight);
  // no_row_all_reduce: the partial product returned as it is; bias_on_every_rank: added before g.
  if (mutant("no_row_all_reduce")) return bias.defined() ? local + bias : local;
  if (mutant("bias_on_every_rank")) return reduce_from_tensor_parallel(bias.defined() ? local + bias : local, group, tag);
  // bias_on_rank_zero: the bias added by tensor rank 0 before g, so the sum holds it once: right in
  // every loss, but the other ranks never use their copy (no gradient, never stepped), so the
  // replicas part: the smallest mistake the replicas check must catch (Note [The replicas'
  // tolerance] in grader/checks_tp.cpp).
  if (mutant("bias_on_rank_zero")) {
    return reduce_from_tensor_parallel(bias.defined() && group.rank() == 0 ? local + bias : local, group, tag);
  }
  const torch::Tensor y = mutant("f_g_swapped") ? copy_to_tensor_parallel(local, group, tag)
                                                : reduce_from_tensor_parallel(local, group, tag);
  return bias.defined() ? y + bias : y;
}

torch::Tensor shard_gpt2_attention_columns(int64_t n_embd, int64_t n_head, int rank, int tp) {
  if (tp <= 0 || rank < 0 || rank >= tp) {
    throw Error(fmt::format("shard_gpt2_attention_columns: rank {} of a tensor-parallel group of {}", rank, tp));
  }
  if (n_head % tp != 0) {
    throw Error(fmt::format("tensor parallelism of {} does not divide GPT-2's {} attention heads: each rank "
                            "computes whole heads, so the TP size must divide n_head",
                            tp, n_head));
  }
  const int64_t width = n_embd / tp;
  // contiguous_c_attn: the rank's third of the 3 x n_embd columns in one run (q, k and v mixed).
  if (mutant("contiguous_c_attn")) return torch::arange(rank * 3 * width, (rank + 1) * 3 * width, torch::kLong);
  std::vector<torch::Tensor> runs;
  for (int64_t part = 0; part < 3; ++part) {  // q, k, v
    const int64_t first = part * n_embd + rank * width;
    runs.push_back(torch::arange(first, first + width, torch::kLong));
  }
  return torch::cat(runs);
}

// The vocabulary (solutions/tp/vocab.cpp)

VocabShard vocab_shard(int64_t vocab, int rank, int tp) {
  if (vocab <= 0 || tp <= 0 || rank < 0 || rank >= tp) {
    throw Error(fmt::format("vocab_shard: a vocabulary of {} at rank {} of a tensor-parallel group of {}", vocab,
                            rank, tp));
  }
  VocabShard shard;
  shard.vocab = vocab;
  shard.padded = (vocab + tp - 1) / tp * tp;
  shard.rows = shard.padded / tp;
  shard.start = rank * shard.rows;
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
  const torch::Tensor outside = ids.lt(shard.start).logical_or(ids.ge(shard.end()));
  const torch::Tensor local = (ids - shard.start).masked_fill(outside, 0);
  const torch::Tensor rows = torch::embedding(weight, local).masked_fill(outside.unsqueeze(-1), 0.0);
  return reduce_from_tensor_parallel(rows, group, tag);
}

torch::Tensor VocabParallelCrossEntropy::forward(AutogradContext* ctx, const torch::Tensor& local_logits,
                                                 const torch::Tensor& targets, VocabShard shard, dist::Group* group,
                                                 std::string tag) {
  const torch::TensorOptions longs = targets.options().dtype(torch::kLong);
  const torch::Tensor padding = torch::arange(shard.start, shard.end(), longs).ge(shard.vocab);
  // padding_counted: the padding columns (zero rows of wte, logit 0) left in the sum of exps.
  const torch::Tensor logits = mutant("padding_counted")
                                   ? local_logits
                                   : local_logits.masked_fill(padding, -std::numeric_limits<double>::infinity());

  if (mutant("all_gathered_logits")) {
    // Right in every number, wrong in the point: the logits gathered whole on every rank (B x T x
    // V floats each, where the lesson keeps B x T x V / TP), an ordinary cross-entropy of them, and
    // the gradient of this rank's own columns. Only the count of the tensor group's collectives
    // tells (grader/checks_tp.cpp, traffic).
    const torch::Tensor all = torch::cat(group->all_gather(logits.contiguous(), tag + " gather"), -1);
    const torch::Tensor lse = torch::logsumexp(all, -1);
    const torch::Tensor ignored = targets.eq(model::kIgnoreIndex);
    const torch::Tensor target_logit =
        all.gather(-1, targets.clamp_min(0).unsqueeze(-1)).squeeze(-1).masked_fill(ignored, 0.0);
    const torch::Tensor owned = targets.ge(shard.start).logical_and(targets.lt(shard.end()));
    const torch::Tensor local_target = (targets - shard.start).masked_fill(owned.logical_not(), 0);
    ctx->save_for_backward({(logits - lse.unsqueeze(-1)).exp(), local_target, owned, ignored});
    return (lse - target_logit).masked_fill(ignored, 0.0);
  }
  // Every rank's max of its columns, then the max of those: the same shift on every rank, so
  // that the exps summed over the ranks share one scale.
  torch::Tensor max = std::get<0>(logits.max(-1)).contiguous();
  // max_not_all_reduced: each rank shifts its exps by its own columns' max, so the sum over the
  // ranks adds exps of different scales: the loss itself is wrong.
  if (!mutant("max_not_all_reduced")) group->all_reduce(max, dist::ReduceOp::MAX, tag + " max");
  const torch::Tensor exps = (logits - max.unsqueeze(-1)).exp();
  torch::Tensor sum = exps.sum(-1);
  if (mutant("gathered_logits")) {
    // The logits gathered whole on every rank, then the split recipe: every rank sums every exp.
    const torch::Tensor all = torch::cat(group->all_gather(logits.contiguous(), tag + " gather"), -1);
    sum = (all - max.unsqueeze(-1)).exp().sum(-1).contiguous();
  }
  // sum_of_exps_in_double: the sum all-reduced in float64, right in every number, B x T x 4 bytes
  // more a step: the smallest mistake the traffic check must catch (Note [The tensor group's
  // tolerance]).
  if (mutant("sum_of_exps_in_double")) {
    torch::Tensor wide = sum.to(torch::kFloat64);
    group->all_reduce(wide, dist::ReduceOp::SUM, tag + " sum of exps");
    sum = wide.to(sum.scalar_type());
  } else {
    group->all_reduce(sum, dist::ReduceOp::SUM, tag + " sum of exps");
  }

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
}

variable_list VocabParallelCrossEntropy::backward(AutogradContext* ctx, variable_list grad_outputs) {
  const variable_list saved = ctx->get_saved_variables();
  const torch::Tensor &softmax = saved[0], &local_target = saved[1], &owned = saved[2], &ignored = saved[3];
  torch::Tensor grad = softmax.clone();
  grad.scatter_add_(-1, local_target.unsqueeze(-1), owned.to(grad.scalar_type()).neg().unsqueeze(-1));
  // ignores_incoming_gradient: softmax - one-hot as it is, not times the mean's 1/tokens: every
  // gradient of the model that many times one process's.
  const torch::Tensor scale = mutant("ignores_incoming_gradient")
                                  ? torch::ones_like(grad_outputs[0]).masked_fill(ignored, 0.0)
                                  : grad_outputs[0].masked_fill(ignored, 0.0);
  return {grad * scale.unsqueeze(-1), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
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
