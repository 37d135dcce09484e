// The kit's training step for the data-parallel exercises: one readable path through
// forward, loss, backward, synchronisation, clipping, optimizer step, schedule, zero_grad.
#pragma once

#include <functional>

#include "dtlab/data/glue.h"
#include "dtlab/train/train_state.h"

namespace dtlab::train {

// Runs one step on this rank's part of the global batch and returns its loss. `sync` runs
// between backward and clipping (gradient synchronisation by hand; empty when DDP already
// synchronised inside backward). Clipping comes after synchronisation so that every rank clips
// the same averaged gradient, as single-process training does.
float data_parallel_step(TrainState& state, const data::Batch& batch,
                         const std::function<void()>& sync);

}  // namespace dtlab::train
