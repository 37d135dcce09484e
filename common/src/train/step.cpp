// The kit's training step, see train/step.h.
#include "dtlab/train/step.h"

#include <ATen/record_function.h>
#include <torch/nn/utils/clip_grad.h>

#include "dtlab/report/profile.h"

namespace dtlab::train {

StepResult training_step(TrainState& state, const StepInput& input, GradientSync& sync,
                         const AfterSync& after_sync) {
  state.module->train();
  const torch::Tensor loss = state.loss(*input.batch);
  sync.before_backward();
  loss.backward();  // with DDP, the buckets are reduced during this call
  StepResult result;
  result.comm_seconds = sync.after_backward();
  if (after_sync) after_sync(input, *state.module);
  apply_update(state);
  result.loss = loss.item<float>();
  return result;
}

void apply_update(TrainState& state) {
  RECORD_USER_SCOPE(report::kUpdateScope);  // the profiler's update phase (report/profile.h)
  if (state.max_grad_norm > 0) {
    torch::nn::utils::clip_grad_norm_(state.module->parameters(), state.max_grad_norm);
  }
  state.optimizer->step();
  state.scheduler->step();
  // Gradients set to none rather than zero (PyTorch 2's default): the next backward then writes
  // each gradient where it would have filled zeros and added to them, two passes over the
  // parameters' size fewer (on the cluster demo's 37M parameters, where those passes are much
  // of a step).
  state.module->zero_grad(/*set_to_none=*/true);
}

}  // namespace dtlab::train
