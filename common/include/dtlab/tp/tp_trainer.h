// The tp exercise's trainer (lm/grid_trainer.h): GPT-2 on the translation data split over a tensor
// x data grid (tp/grid.h, --tp), trained by the kit's step (tp/tp_step.h) around the student's
// operators (tasks/tp.h). What it adds to the step is what makes the grid's update the one a
// single process makes on the same global batch, and what the grader reads:
//   * the loss of a replica's minibatch is DP / N x (the sum of its target tokens' cross-entropy),
//     N the target tokens of the global batch (Note [Data-parallel loss] in lm/loss.h), computed
//     by the vocabulary-parallel cross-entropy on the split logits (tp::token_loss_sum);
//   * the grader's dumps at step 1: this rank's slices' parameters and gradients under their
//     Hugging Face names, once the gradients are final (averaged over DP), before clipping;
//   * the summary (results.json's "tensor_parallel"): the grid, every rank's parameter bytes,
//     rank 0's bytes all-reduced over its tensor group per step and what GPT-2's shape predicts
//     (Note [Bytes of a tensor-parallel step]), the data group's, and each rank's checksums of
//     its replicated and of all its parameters (the replicas check).
//
// Note [Bytes of a tensor-parallel step]: per step, a rank's tensor group all-reduces (the
// CommLog's bytes: the payload each rank contributes, B x T positions of width H in float32):
//   forward   1 (the embedding's g) + 2 per block (g after the attention's and the MLP's
//             row-parallel c_proj), each B·T·H floats; the loss's three of B·T floats
//             (the max, the sum of exps, the target's logit);
//   backward  2 per block (f's backward before c_attn and c_fc) + 1 (the head's f), B·T·H each;
//   clipping  one double (the global norm's split part).
// So (4L + 2)·B·T·H·4 + 3·B·T·4 + 8 bytes, whatever TP is; a ring all-reduce puts 2(TP-1)/TP of
// each on the wire. Megatron's "two all-reduces per block forward and two backward" is the 4L.
// The data group all-reduces the rank's slices' gradient once a step, 2(DP-1)/DP of it on the
// wire: predicted_bytes_sent_per_step is the two (the cluster demo's figure 15 against eth0).
#pragma once

#include <memory>

#include "dtlab/dist/group.h"
#include "dtlab/lm/grid_trainer.h"
#include "dtlab/model/gpt2.h"

namespace dtlab::tp {

// On every rank of `world`, at the same point: the grid of --tp (an Error naming --tp when it
// does not divide the world, or GPT-2's heads), this rank's slices of `whole`.
std::unique_ptr<lm::GridTrainer> make_tensor_parallel_trainer(model::Gpt2LMHeadModel whole, dist::Group& world,
                                                              const lm::LmOptions& options);

}  // namespace dtlab::tp
