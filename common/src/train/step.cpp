// The kit's training step, see train/step.h.
#include "dtlab/train/step.h"

#include <algorithm>
#include <set>

#include <ATen/record_function.h>
#include <torch/types.h>
#include <torch/utils.h>

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

void clip_gradients(const std::vector<torch::Tensor>& parameters, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const torch::Tensor& p : parameters) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return;
  const torch::Device where = grads.front().device();
  std::vector<torch::Tensor> norms;
  for (const torch::Tensor& g : grads) norms.push_back(g.norm(2).to(where));
  const torch::Tensor total = norms.size() == 1 ? norms.front() : torch::stack(norms).norm(2);
  const torch::Tensor coefficient = (max_norm / (total + 1e-6)).clamp_max(1.0);
  for (torch::Tensor& g : grads) g.mul_(coefficient.to(g.device()));
}


void apply_update(TrainState& state) {
  RECORD_USER_SCOPE(report::kUpdateScope);  // the profiler's update phase (report/profile.h)
  // The gradients this rank holds at the update, for results.json's "memory" (train/run.h).
  std::vector<torch::Tensor> grads;
  for (const torch::Tensor& p : state.module->parameters()) grads.push_back(p.grad());
  state.gradient_bytes = std::max(state.gradient_bytes, storage_bytes(grads));
  if (state.max_grad_norm > 0) clip_gradients(state.module->parameters(), state.max_grad_norm);
  state.optimizer->step();
  state.scheduler->step();
  // Gradients set to none rather than zero (PyTorch 2's default): the next backward then writes
  // each gradient where it would have filled zeros and added to them, two passes over the
  // parameters' size fewer (on the cluster demo's 37M parameters, where those passes are much
  // of a step).
  state.module->zero_grad(/*set_to_none=*/true);
}

int64_t storage_bytes(const std::vector<torch::Tensor>& tensors) {
  std::set<const void*> seen;
  int64_t bytes = 0;
  for (const torch::Tensor& t : tensors) {
    if (!t.defined() || !t.has_storage()) continue;
    if (seen.insert(t.storage().unsafeGetStorageImpl()).second) bytes += static_cast<int64_t>(t.storage().nbytes());
  }
  return bytes;
}

}  // namespace dtlab::train
