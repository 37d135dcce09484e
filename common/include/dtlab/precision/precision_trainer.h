// The precision exercise's trainer (lm/grid_trainer.h): GPT-2 data parallel over the world, each
// rank's step the one dtlab/tasks/precision.h draws, with the student's checkpointed blocks, compute
// copy and loss scaler, and what the step holds measured around them.
//
// Note [The loss of a data-parallel step]: as cp's (Note [The loss of a split sequence]): N, the
// global batch's target tokens, is all-reduced first; each micro-batch's loss is the sum of its
// tokens' cross-entropy over N, so the sum over micro-batches and ranks of their gradients is one
// process's gradient of the whole batch, whatever the micro-batches' sizes.
//
// Note [What a block keeps]: the kit reads the tensor meter (report/tensor_bytes.h) before and
// after each block's forward: the bytes that forward left alive, its output and whatever its graph
// saved for backward. A checkpointed block may keep only its output and the generator's state
// (the input was alive already); a block run as it is keeps every activation its backward needs.
// Each block's figure beside a checkpoint's, and every block's forwards a micro-batch, are in the
// summary (the grader's recompute-memory check).
//
// Note [Scaler's truth]: the kit looks at each rank's fp16 gradients itself before the scaler
// does, so results.json holds, per step, whether any rank's overflowed beside what the scaler
// decided, the scale it used and the fraction of nonzero gradients fp16 flushed to zero, at that
// scale and at 1 (no scaler). After found_overflow the kit gathers every rank's answer and stops
// every rank with an error naming them when they differ: a rank that skipped alone would otherwise
// leave the others waiting in the gradients' all-reduce.
#pragma once

#include <memory>

#include "dtlab/dist/group.h"
#include "dtlab/lm/grid_trainer.h"
#include "dtlab/lm/options.h"
#include "dtlab/model/gpt2.h"

namespace dtlab::precision {

// Every rank of `world`, from the whole model (rank 0's weights, already broadcast) and the flags.
std::unique_ptr<lm::GridTrainer> make_precision_trainer(model::Gpt2LMHeadModel whole, dist::Group& world,
                                                     const lm::LmOptions& options);

}  // namespace dtlab::precision
