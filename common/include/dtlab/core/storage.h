// A tensor's memory given back and made again while the tensor keeps its identity, shape and
// place in a module: what FSDP does to a unit between its stages (shard/flat_parameters.h) and tp
// to the whole model between evaluations (common/exercises/tp/trainer.cpp). Reading a released tensor's values
// is LibTorch's "storage of size 0" error, never a read of freed memory.
#pragma once

#include <torch/types.h>

namespace dtlab {

// Frees t's storage (every view of it sees an empty storage); the allocator gets its bytes back.
void release_storage(const torch::Tensor& t);
// Gives a released storage memory of its full size again (values undefined: the caller fills
// them); nothing when it has it.
void restore_storage(const torch::Tensor& t, size_t bytes);
// Whether t's storage holds at least `bytes` bytes.
bool holds_storage(const torch::Tensor& t, size_t bytes);

}  // namespace dtlab
