// precision: memory and precision. What a training step holds, and three ways to buy it back, on
// GPT-2 over data-parallel ranks. The contract between the kit and the student: tasks/precision/ implements what this header
// declares, solutions/precision/ is the reference; handouts/precision.md explains each TODO.
//
// A step holds four things: the parameters, their gradients, the optimiser's state and the
// activations the forward keeps for the backward. zero sharded the first three; this exercise
// is about the fourth, and about the bytes of every number:
//   Part 1, activation checkpointing (Chen et al. 2016; Megatron-LM's "full recompute"): a
//     checkpointed block keeps only its input; backward runs its forward again, with the random
//     generator as it was, so dropout draws the same masks, and backpropagates through that.
//     Memory for compute: one more forward per checkpointed block.
//   Part 2, mixed precision (Micikevicius et al. 2018): the forward and backward in bf16 on a
//     compute copy of the fp32 master weights; every micro-batch's bf16 gradients added into fp32
//     master gradients; AdamW on the masters. An update smaller than a bf16 weight's last bit is
//     lost in bf16 and kept in fp32.
//   Part 3, fp16 gradients on the wire with a dynamic loss scaler: fp16's smallest normal number
//     is 6.1e-5 and its largest 65504, so small gradients flush to zero and large ones overflow to
//     inf. The loss is multiplied by a scale S before backward, so every gradient is S times
//     larger; a step whose fp16 gradients hold an inf or a NaN on any rank is skipped by every rank
//     and S halved; after a run of good steps S doubles.
//
// The kit's step on every rank (common/exercises/precision/trainer.cpp):
//
//   masters = the fp32 GPT-2 (rank 0's weights on every rank)
//   compute = masters (fp32), or a bf16 copy (--precision bf16)
//   every step:
//     bf16: refresh_compute_weights(masters, compute)
//     for each micro-batch: loss = forward (block i through CheckpointedBlock when
//         is_checkpointed(i, --recompute_every)), weighted by the global batch's target tokens;
//         (fp16: loss * scaler.scale()).backward()
//         bf16: accumulate_master_gradients(compute, masters)
//     fp32, bf16: the masters' gradients summed over the ranks (one all-reduce, fp32)
//     fp16: half = each gradient (this rank's part of the global batch's) / world, in fp16
//           (the sum of W parts of at most 65504 / W cannot overflow: PyTorch DDP's fp16 hook)
//           overflow = scaler.found_overflow(half, world)   // the kit then checks every rank agrees
//           unless overflow: half summed over the ranks (fp16); scaler.unscale(half, masters);
//                            the masters' gradients times world
//           scaler.update(overflow)
//     unless skipped: clip, AdamW on the masters, the schedule's step
#pragma once

#include <torch/csrc/autograd/custom_function.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace dtlab::dist {
class Group;
}

namespace dtlab::precision {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// ---------------------------------------------------------------------------------------------
// Part 1: activation checkpointing.

// One GPT-2 block as the kit hands it over: hidden [batch, seq, n_embd] -> hidden, the block's
// parameters and its dropout inside. The kit counts every call (each is one forward of the block).
using BlockForward = std::function<torch::Tensor(const torch::Tensor&)>;

// Note [The block in an autograd context]: backward gets only its context, so forward must leave
// the block there. ctx->saved_data holds IValues, and a BlockForward is not one, so the kit wraps
// a pointer to it (it outlives the backward): save_block(ctx, block) in forward, saved_block(ctx)
// in backward (common/exercises/precision/saved_block.cpp). The random generator's state is a tensor
// (at::detail::getDefaultCPUGenerator().get_state(), set_state(state)): an IValue as it is.
void save_block(AutogradContext* ctx, const BlockForward* block);
const BlockForward& saved_block(AutogradContext* ctx);

// A checkpointed block: CheckpointedBlock::apply(&block, hidden).
struct CheckpointedBlock : torch::autograd::Function<CheckpointedBlock> {
  // Part 1a. The block's output, computed without recording a graph: nothing of the block's
  // forward is kept but its input and the generator's state before it.
  static torch::Tensor forward(AutogradContext* ctx, const BlockForward* block, const torch::Tensor& hidden);
  // Part 1b. Runs the block's forward again from the kept input, this time recording, with the
  // generator restored to the kept state (so dropout draws the masks the first forward drew), and
  // backpropagates grad_outputs[0] through it: the block's parameters' gradients accumulate as
  // they would have without checkpointing. Afterwards the generator is back where backward found
  // it, so that what the rest of training draws does not depend on checkpointing. Returns
  // {undefined (the block), d loss / d hidden}.
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs);
};

// Part 1c. The policy: whether block `block` (0-based) is checkpointed when every `every`-th
// block is: blocks 0, every, 2 * every, ...; every = 1: each block; every = 0: none.
bool is_checkpointed(int64_t block, int64_t every);

// ---------------------------------------------------------------------------------------------
// Part 2: bf16 compute, fp32 masters. masters[i] (fp32, the optimiser's) and compute[i] (bf16,
// the forward's) are the same parameter of two copies of the model, in the same order.

// Part 2a. Each master's value, rounded to bf16, into its compute copy (in place, not recorded by
// autograd). The masters are not changed.
void refresh_compute_weights(const std::vector<torch::Tensor>& masters, const std::vector<torch::Tensor>& compute);

// Part 2b. After one micro-batch's backward: each compute parameter's bf16 gradient added into its
// master's fp32 gradient (which is undefined before the step's first micro-batch: then it becomes
// that gradient, in fp32), and the compute gradient reset, so that the next micro-batch's starts
// from zero. The sum over micro-batches is then taken in fp32, not in bf16.
void accumulate_master_gradients(const std::vector<torch::Tensor>& compute, const std::vector<torch::Tensor>& masters);

// ---------------------------------------------------------------------------------------------
// Part 3: fp16 gradients with a dynamic loss scaler (PyTorch's GradScaler, Megatron-LM's
// DynamicGradScaler).

struct LossScalerOptions {
  double initial_scale = 65536;  // 2^16
  double growth_factor = 2;
  double backoff_factor = 0.5;
  int64_t growth_interval = 100;  // good steps in a row before the scale grows
};

class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(LossScalerOptions options);

  // The loss is multiplied by this before backward.
  double scale() const { return scale_; }
  // Good steps since the scale last changed.
  int64_t good_steps() const { return good_steps_; }

  // Part 3a. half_grads: this rank's fp16 gradients (scaled; its part of the global batch's
  // gradient, divided by the world size). Whether any rank's hold an inf or a NaN: this rank looks at its own, and the ranks of
  // `group` agree in one collective, so that every rank returns the same answer (a rank that
  // skipped alone would leave the others waiting in the gradients' all-reduce).
  bool found_overflow(const std::vector<torch::Tensor>& half_grads, dist::Group& group);

  // Part 3b. half_grads summed over the ranks (fp16, finite): into each master's fp32 gradient
  // (master.grad(), defined by the kit), divided by the scale. (The kit then multiplies by the
  // world size: the global batch's gradient, unscaled.)
  void unscale(const std::vector<torch::Tensor>& half_grads, const std::vector<torch::Tensor>& masters) const;

  // Part 3c. After every step. overflow (the step was skipped): the scale times backoff_factor,
  // the count of good steps back to 0. Otherwise one more good step; when there have been
  // growth_interval in a row, the scale times growth_factor and the count back to 0.
  void update(bool overflow);

 private:
  LossScalerOptions options_;
  double scale_ = 0;
  int64_t good_steps_ = 0;
};

}  // namespace dtlab::precision
