// One training step of the tensor-parallel GPT-2 (tp/gpt2_tp.h) on a tensor × data grid
// (tp/grid.h): what train::training_step and train::apply_update do for one process, with the
// two places where the ranks must meet made explicit.
//
//   loss = the vocabulary-parallel loss of this DP rank's minibatch (the same on its TP ranks)
//   backward                                 (TP's collectives run inside: f and g, the loss)
//   average every gradient over the DP group (one bucket: all_reduce SUM, then / DP)
//   clip by the global norm                  (one all_reduce of a float over the TP group)
//   AdamW step, zero the gradients           (no communication: every rank updates its shard)
//
// Note [Replicated gradients need no TP sync]: the parameters every TP rank holds whole (wpe,
// the layer norms, the row-parallel biases; tp::is_replicated) act only on activations that are
// whole and equal on every TP rank: a layer norm's input is the residual stream, made whole by g
// after each row-parallel layer; a row-parallel bias is added after g; ln_f's output feeds the
// head through f, whose backward sums the ranks' parts of its gradient. Their gradients are
// therefore the same on every TP rank without any communication, and an all-reduce over TP
// would only cost time (averaging would leave them as they are; summing would count them TP
// times). tests/tp_train_test.cpp asserts the equality at every step instead of enforcing it.
// Megatron-LM syncs only where this fails: sequence parallelism, whose layer norms see a slice
// of the sequence.
//
// Note [Clipping a split model]: one process clips by sqrt(Σ_p |g_p|²) over ALL its gradients.
// A TP rank holds a slice of each split parameter and a whole copy of each replicated one, so
// the global norm² is the TP group's SUM of the split parameters' |g|² plus the replicated
// parameters' |g|² counted ONCE (each rank holds the same value: add it after the all_reduce,
// not into it, or it counts TP times). The padding rows of wte have zero gradients and add
// nothing. DP needs no term: after the average, the DP ranks of a TP rank hold equal gradients.
//
// AdamW is element-wise, so a rank's update of its shard is the slice of the whole update, with
// the weight-decay groups of one process: train::make_adamw decides by dimension (fewer than two:
// no decay), and a shard keeps its parameter's dimensions (tp/gpt2_tp.h). Give make_adamw the
// TensorParallelGpt2 itself.
//
// The DP average is that of DDP: the mean of the minibatches' mean losses. It equals one
// process's mean over the global batch when every DP rank's minibatch has the same number of
// targets that are not ignored (-100).
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <functional>

#include "dtlab/tp/gpt2_tp.h"
#include "dtlab/tp/grid.h"

namespace dtlab::tp {

struct TensorParallelStepResult {
  double loss = 0;         // this DP rank's minibatch loss, before the update (equal on its TP ranks)
  double global_loss = 0;  // the mean of `loss` over the DP group (one all_reduce of a double)
  double grad_norm = 0;   // the global gradient norm before clipping (Note [Clipping a split model])
};

// Called once the gradients are averaged over DP, before clipping, on every rank (a test reads
// the gradients there; collectives on the grid's groups are allowed, the same on every rank).
using AfterGradientSync = std::function<void(TensorParallelGpt2Impl& model)>;

// In place: every gradient becomes its mean over the grid's data group, in one all_reduce of
// all of them concatenated (tag "tp data-parallel gradients"). Nothing when DP is 1.
// A dtlab::Error when a parameter has no gradient (every parameter of GPT-2 gets one).
void average_gradients_over_data(TensorParallelGpt2Impl& model, Grid& grid);

// The global gradient norm of the split model (Note [Clipping a split model]), one all_reduce
// of a float over the tensor group (tag "tp gradient norm"), the same on every rank.
double tensor_parallel_gradient_norm(TensorParallelGpt2Impl& model, Grid& grid);

// train::clip_gradients's rule with the global norm: every gradient times
// min(1, max_norm / (norm + 1e-6)). Returns the norm before clipping. max_norm <= 0: no clip
// (and no communication), returns 0.
double clip_tensor_parallel_gradients(TensorParallelGpt2Impl& model, Grid& grid, double max_norm);

// One step (the header's list). `optimizer` holds this rank's parameters of `model` (make_adamw).
// `loss` runs the forward of this DP rank's minibatch (the same on its TP ranks) and returns its
// loss, whose backward the step runs. Leaves the gradients set to none.
TensorParallelStepResult tensor_parallel_step(TensorParallelGpt2Impl& model, torch::optim::Optimizer& optimizer,
                                              Grid& grid, const std::function<torch::Tensor()>& loss,
                                              double max_grad_norm, const AfterGradientSync& after_sync = nullptr);

// The same with model.loss (lm_loss's shifted mean) of input_ids and labels [batch, seq].
TensorParallelStepResult tensor_parallel_step(TensorParallelGpt2Impl& model, torch::optim::Optimizer& optimizer,
                                              Grid& grid, const torch::Tensor& input_ids,
                                              const torch::Tensor& labels, double max_grad_norm,
                                              const AfterGradientSync& after_sync = nullptr);

}  // namespace dtlab::tp
