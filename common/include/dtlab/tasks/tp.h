// tp: tensor parallelism of GPT-2 as Megatron-LM does it (Shoeybi et al. 2019), in C++ over the
// kit's process group. Where dp gives each rank its own minibatch and the whole model, tp gives
// every rank of a TP group the SAME minibatch and a slice of every large weight: each rank
// computes its slice of each layer, and the ranks meet at two collectives per block in forward
// and two in backward. The contract between the kit and the student: a student's tasks/tp/
// implements what this header declares, solutions/tp/ is the reference; handouts/tp.md explains
// each TODO. The kit's tensor-parallel GPT-2 (tp/gpt2_tp.h) and its trainer on a tensor x data
// grid (tp/tp_trainer.h, common/drivers/tp_main.cpp) stand on it.
//
// The two conjugate operators (Megatron's f and g) carry the whole idea:
//
//   f = copy_to_tensor_parallel       forward: identity      backward: all-reduce (SUM)
//   g = reduce_from_tensor_parallel   forward: all-reduce    backward: identity
//
// A block computes   x -> f -> column-parallel (split output) -> local work -> row-parallel -> g
// so its activations between f and g are split (by heads, by MLP columns) and its input and
// output are whole on every rank. In GPT-2's Conv1D layout (a weight is [in, out], y = x·W + b):
//   column-parallel: this rank holds W[:, its columns] and b[its columns]: y_r = f(x)·W_r + b_r;
//   row-parallel:    this rank holds W[its rows, :] and the whole b: y = g(x_r·W_r) + b, the
//                    bias added once, after the sum (added on every rank before it, it would
//                    count TP times).
//
// The vocabulary is split too: rank r holds rows [start, start + rows) of the tied wte (the
// vocabulary padded to a multiple of the TP size with rows that no id reaches), so the head's
// logits are split along the vocabulary and the loss is computed without gathering them.
#pragma once

#include <torch/autograd.h>
#include <torch/types.h>

#include <string>

#include "dtlab/dist/group.h"

namespace dtlab::tp {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Calling a collective (dist/group.h): group.all_reduce(t, dist::ReduceOp::SUM, tag) reduces t in
// place on every rank (MAX for a maximum; the other ops are in dist::ReduceOp), so pass a tensor
// you own: a clone, or a fresh result of an operation, never an input you were given. Every
// collective takes contiguous tensors only (a dtlab::Error says so otherwise: call .contiguous()
// on a slice or a transpose). The tag names the call in the kit's traffic records and in the
// message of a rank that disagrees with the others: pass the one you were given.
//
// Note [The group in an autograd context]: backward gets only its context, so forward must leave
// the group there. ctx->saved_data holds IValues; a Group is not one, so the kit wraps a pointer
// to it in a capsule (tp/saved_group.h): save_group(ctx, group, tag) in forward,
// saved_group(ctx) and saved_tag(ctx) in backward. Not a static: the test runs several ranks as
// threads of one process, each with its own group, and backward may run on another thread than
// forward (autograd's device threads). The group must outlive the backward pass.

// f: identity forward; backward all-reduces (SUM) the gradient of x over the TP group. Inputs of a
// column-parallel layer go through it: each rank's slice of the layer contributes a part of
// d loss / d x, and the replicated layers before it need the whole.
struct CopyToTensorParallel : torch::autograd::Function<CopyToTensorParallel> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, dist::Group* group, std::string tag);
  // Returns {d x, undefined, undefined}: one gradient per argument of forward.
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs);
};

// g: all-reduce (SUM) forward; identity backward. Outputs of a row-parallel layer (and of the
// vocabulary-parallel embedding) go through it: the ranks' partial sums become the whole.
struct ReduceFromTensorParallel : torch::autograd::Function<ReduceFromTensorParallel> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, dist::Group* group, std::string tag);
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs);
};

// The two as calls: CopyToTensorParallel::apply(x, &group, tag), ReduceFromTensorParallel::apply(...).
// Every collective carries `tag` (the CommLog, timeouts).
torch::Tensor copy_to_tensor_parallel(const torch::Tensor& x, dist::Group& group, const std::string& tag);
torch::Tensor reduce_from_tensor_parallel(const torch::Tensor& x, dist::Group& group, const std::string& tag);

// Column-parallel linear on a Conv1D-layout shard: x [..., in] whole on every rank, weight
// [in, out / TP] (this rank's columns), bias [out / TP] or undefined. Returns this rank's columns
// of x·W + b, [..., out / TP]: the output stays split. x goes through f.
torch::Tensor column_parallel_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                     dist::Group& group, const std::string& tag);

// Row-parallel linear: x [..., in / TP] this rank's columns of the input (what a column-parallel
// layer left), weight [in / TP, out] (this rank's rows), bias [out] whole or undefined. Returns
// x·W + b whole on every rank: the local product through g, then the bias, once.
torch::Tensor row_parallel_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                  dist::Group& group, const std::string& tag);

// The columns of GPT-2's fused c_attn weight [n_embd, 3 * n_embd] (= [q | k | v] along the output
// dimension, head h of each at columns h*head_dim .. (h+1)*head_dim - 1 of its third) that TP rank
// `rank` holds: the q, k and v columns of its heads n_head/TP * rank .. n_head/TP * (rank+1) - 1,
// in that order (q's, then k's, then v's), so that the rank's output splits into its heads' q, k,
// v as the whole one does. Not one contiguous slice of the 3 * n_embd columns: that would give
// rank 0 all of q and part of k. int64 [3 * n_embd / TP]. TP must divide n_head: a dtlab::Error
// naming both otherwise.
torch::Tensor shard_gpt2_attention_columns(int64_t n_embd, int64_t n_head, int rank, int tp);

// The vocabulary cut into TP equal shards: `vocab` rounded up to `padded`, a multiple of TP; rank
// r holds ids [start, start + rows). Ids from vocab to padded - 1 are padding: no token has them,
// their rows of wte stay zero, and their logits must never count in the loss.
struct VocabShard {
  int64_t vocab = 0;
  int64_t padded = 0;
  int64_t start = 0;
  int64_t rows = 0;
  int64_t end() const { return start + rows; }
};
VocabShard vocab_shard(int64_t vocab, int rank, int tp);

// Vocabulary-parallel embedding: ids [...] int64 in [0, vocab), weight [shard.rows, n_embd] this
// rank's rows of wte. Each rank looks up the ids it holds (the others read row 0, then are zeroed)
// and g sums the ranks' lookups: every id's row, whole on every rank, [..., n_embd].
torch::Tensor vocab_parallel_embedding(const torch::Tensor& ids, const torch::Tensor& weight, const VocabShard& shard,
                                       dist::Group& group, const std::string& tag);

// Vocabulary-parallel cross-entropy, with its own backward (not autograd through collectives):
// local_logits [N, shard.rows] this rank's columns of the logits, targets [N] int64 in [0, vocab)
// or model::kIgnoreIndex (-100), the same on every rank. Returns the per-token loss [N], the same
// on every rank: log Σ_v exp(l_v) - l_target over the real vocabulary, 0 where ignored. Three
// all-reduces of [N] floats, never the logits: the max (MAX, for a stable exp), the sum of exps
// (SUM), the target's logit (SUM: only its owner contributes it). Padding columns count as -inf.
// Backward: d loss_n / d l_v = softmax_v - [v = target_n], on this rank's columns only, times the
// incoming gradient of loss_n; 0 on ignored rows and on padding columns.
// The recipe is for split logits only: run on logits gathered whole on every rank, its SUM of
// exps counts each exp TP times and the loss comes out exactly log TP too high (the grader's
// losses-2 check names that case).
struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& local_logits, const torch::Tensor& targets,
                               VocabShard shard, dist::Group* group, std::string tag);
  // {d local_logits, undefined for each of targets, shard, group, tag}
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs);
};

// VocabParallelCrossEntropy::apply after checking the shapes and the targets (a dtlab::Error on a
// target outside [0, vocab) that is not -100, or logits that are not [N, shard.rows]).
torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& local_logits, const torch::Tensor& targets,
                                           const VocabShard& shard, dist::Group& group, const std::string& tag);

}  // namespace dtlab::tp
