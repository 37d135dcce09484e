// AdamW on one rank's shard (ZeRO-1, Note [Flat parameters]): the kit's AdamW (train/optimizer.h)
// over one 1-D view per part of a parameter that lies in the shard, in the two groups make_adamw
// makes (weight decay on a part whose whole parameter takes it). AdamW is element by element, so
// every element gets exactly the update one process's AdamW gives it (the same constants, the
// same operations: tests/shard_test.cpp holds them to the bit), while its two moments exist only
// for this rank's 1/N of the model: 8 bytes a parameter become 8/N.
//
// Its state is LibTorch's own layout (step, exp_avg, exp_avg_sq per tensor), keyed by the views;
// the learning-rate schedule (train::LinearWarmupSchedule) drives it like any optimiser.
#pragma once

#include <torch/optim/adamw.h>

#include <cstdint>
#include <memory>

#include "dtlab/shard/flat_parameters.h"
#include "dtlab/shard/units.h"
#include "dtlab/train/optimizer.h"

namespace dtlab::shard {

// The optimiser of `rank`'s piece of flat.values(). Its parameters are views of that piece, and
// their gradients views of shard_gradients ([shard_numel]): put the averaged gradient of the
// piece there (reduce-scatter) before step(). Never call its zero_grad(): the gradients are the
// caller's buffer. The padding is no parameter's part and takes no update.
std::unique_ptr<torch::optim::AdamW> make_shard_adamw(FlatParameters& flat, int rank,
                                                      torch::Tensor shard_gradients,
                                                      const train::OptimizerOptions& options);
// The same over rank's piece of every unit (Note [Shard units]): each unit's shard_values, its
// gradient in the unit's shard_gradients.
std::unique_ptr<torch::optim::AdamW> make_shard_adamw(std::vector<ShardUnit>& units, int rank,
                                                      const train::OptimizerOptions& options);

// The bytes an AdamW's state holds (train/optimizer.h): what ZeRO-1 divides by the world.
using train::optimizer_state_bytes;

}  // namespace dtlab::shard
