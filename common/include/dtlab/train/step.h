// The kit's training step, for any model and any gradient synchronisation: one readable path
// through forward and loss, backward, synchronisation, the "gradients are synchronised" point,
// clipping, optimiser step, schedule step, zero_grad.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "dtlab/data/batch.h"
#include "dtlab/train/gradient_sync.h"
#include "dtlab/train/train_state.h"

namespace dtlab::train {

// Where the loop is when a step runs.
struct StepInput {
  int64_t step = 0;  // from 1
  int epoch = 0;     // from 1
  const std::vector<int64_t>* rows = nullptr;  // the examples of this rank's minibatch
  const data::Batch* batch = nullptr;
};

struct StepResult {
  float loss = 0;           // this rank's minibatch loss, before the update
  double comm_seconds = 0;  // waiting for gradient synchronisation
};

// Called once the gradients are synchronised, before clipping: what every rank then holds is
// what single-process training on the whole batch would hold (the grader's rank dump hooks in
// here).
using AfterSync = std::function<void(const StepInput&, const torch::nn::Module&)>;

// One step on this rank's minibatch. Clipping comes after synchronisation so that every rank
// clips the same averaged gradient, as single-process training does.
StepResult training_step(TrainState& state, const StepInput& input, GradientSync& sync,
                         const AfterSync& after_sync = nullptr);

// The end of every step, once the gradients are final: clip (state.max_grad_norm), optimiser
// step, schedule step, zero the gradients. A step of its own (the pipeline's) calls it too.
void apply_update(TrainState& state);

// LibTorch's clip_grad_norm_(parameters, max_norm) (2-norm), in the same operations, so the same
// numbers, but for gradients on one device or several (a pipeline on GPUs): the per-parameter
// norms meet on the first gradient's device, where LibTorch's would stack tensors of different
// devices and fail.
void clip_gradients(const std::vector<torch::Tensor>& parameters, double max_norm);

// The bytes of the storages under `tensors`, each storage once (the views of one flat buffer count
// once; an undefined tensor, or one without storage, none): what those tensors hold.
int64_t storage_bytes(const std::vector<torch::Tensor>& tensors);

}  // namespace dtlab::train
