// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
// precision, part 1: activation checkpointing (dtlab/tasks/precision.h).
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/autograd.h>

#include "dtlab/core/error.h"
#include "dtlab/tasks/precision.h"

namespace dtlab::precision {
namespace {

[[maybe_unused]] constexpr const char* kRngKey = "rng_state";

// The generator dropout draws from (model/dropout.h): the process's default CPU generator. Its
// state is read and written under its own lock, as LibTorch's own users do.
at::Generator generator() { return at::detail::getDefaultCPUGenerator(); }

[[maybe_unused]] torch::Tensor rng_state() {
  at::Generator g = generator();
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.get_state();
}

[[maybe_unused]] void set_rng_state(const torch::Tensor& state) {
  at::Generator g = generator();
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_state(state);
}

}  // namespace

torch::Tensor CheckpointedBlock::forward(AutogradContext* ctx, const BlockForward* block,
                                         const torch::Tensor& hidden) {
  save_block(ctx, block);
  // TODO(precision): keep the input and the generator's state, then run the block without recording a graph (its activations are freed as soon as it returns).
  throw dtlab::NotImplemented("TODO(precision): keep the input and the generator's state, then run the block without recording a graph (its activations are freed as soon as it returns).");
}

variable_list CheckpointedBlock::backward(AutogradContext* ctx, variable_list grad_outputs) {
  [[maybe_unused]] const BlockForward& block = saved_block(ctx);
  // TODO(precision): restore the kept state, run the block again from a leaf copy of the input with the graph recorded, backpropagate the output's gradient through it, put the generator back; return the input's gradient.
  throw dtlab::NotImplemented("TODO(precision): restore the kept state, run the block again from a leaf copy of the input with the graph recorded, backpropagate the output's gradient through it, put the generator back; return the input's gradient.");
}

bool is_checkpointed(int64_t block, int64_t every) {
  // TODO(precision): blocks 0, every, 2 * every, ...; none when every is 0.
  throw dtlab::NotImplemented("TODO(precision): blocks 0, every, 2 * every, ...; none when every is 0.");
}

}  // namespace dtlab::precision
