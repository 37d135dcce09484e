// Every rank starts from rank 0's model: the one way the kit copies a module's parameters and
// buffers across ranks (DDP at construction, the drivers, the tests).
#pragma once

#include <torch/nn/module.h>

#include <string>
#include <vector>

#include "dtlab/dist/group.h"

namespace dtlab::dist {

// Copies rank 0's parameters and (when include_buffers) buffers into every rank's module, bit
// for bit in every dtype: the tensors are grouped by dtype and each group is flattened and
// broadcast once in that dtype, so no value is rounded through another type (an int64 buffer
// above 2^24 or a float64 statistic survives). Parameters shared by several submodules (tied
// weights) are sent once. Every rank must call it with a module of the same structure.
void broadcast_module_state(torch::nn::Module& module, Group& group, bool include_buffers = true,
                            const std::string& tag = "initial state");

// Copies rank src's values of `tensors` into every rank's, the same way (grouped by dtype, one
// broadcast per dtype, bit for bit): a part of a model, such as a pipeline stage's parameters
// from the rank that trained them. Every rank passes tensors of the same shapes and dtypes, in
// the same order.
void broadcast_tensors(const std::vector<torch::Tensor>& tensors, Group& group, int src, const std::string& tag);

}  // namespace dtlab::dist
