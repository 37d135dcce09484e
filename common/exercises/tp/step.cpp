// The tensor-parallel training step, see tp/tp_step.h.
#include "dtlab/tp/tp_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/dist/all_reduce_tensors.h"

namespace dtlab::tp {
void average_gradients_over_data(TensorParallelGpt2Impl& model, Grid& grid) {
  if (grid.dp() == 1) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const auto& p : model.named_parameters()) {
    if (!p.value().grad().defined()) {
      throw Error(fmt::format("{} has no gradient to average over the data-parallel group: run backward on the "
                              "loss of every parameter first",
                              hf_name(p.key())));
    }
    grads.push_back(p.value().grad());
  }
  // One bucket: the model is small next to one collective's latency; a large one would bucket
  // as DDP does. The DP ranks of a TP rank hold the same shapes in the same order.
  dist::all_reduce_tensors(grads, grid.data(), dist::ReduceOp::SUM, "tp data-parallel gradients");
  for (const torch::Tensor& g : grads) g.div_(grid.dp());
}

double tensor_parallel_gradient_norm(TensorParallelGpt2Impl& model, Grid& grid) {
  torch::NoGradGuard no_grad;
  // Note [Clipping a split model]: split parameters' squares summed over TP, replicated ones' once.
  // Summed in double: the sum of a few dozen squares then loses nothing the float norms hold.
  torch::Tensor split = torch::zeros({1}, torch::kDouble), replicated = torch::zeros({1}, torch::kDouble);
  for (const auto& p : model.named_parameters()) {
    const torch::Tensor& g = p.value().grad();
    if (!g.defined()) continue;
    torch::Tensor& sum = is_replicated(hf_name(p.key())) ? replicated : split;
    sum += g.norm(2).to(torch::kCPU, torch::kDouble).square();
  }
  grid.tensor().all_reduce(split, dist::ReduceOp::SUM, "tp gradient norm");
  return std::sqrt((split + replicated).item<double>());
}

double clip_tensor_parallel_gradients(TensorParallelGpt2Impl& model, Grid& grid, double max_norm) {
  if (max_norm <= 0) return 0;
  const double norm = tensor_parallel_gradient_norm(model, grid);
  torch::NoGradGuard no_grad;
  for (const auto& p : model.parameters()) {
    torch::Tensor g = p.grad();
    if (!g.defined()) continue;
    // train::clip_gradients's coefficient (train/step.cpp), in the gradients' dtype as it is there.
    const torch::Tensor coefficient = (max_norm / (torch::full({}, norm, g.options()) + 1e-6)).clamp_max(1.0);
    g.mul_(coefficient);
  }
  return norm;
}

TensorParallelStepResult tensor_parallel_step(TensorParallelGpt2Impl& model, torch::optim::Optimizer& optimizer,
                                              Grid& grid, const torch::Tensor& input_ids,
                                              const torch::Tensor& labels, double max_grad_norm,
                                              const AfterGradientSync& after_sync) {
  return tensor_parallel_step(
      model, optimizer, grid, [&] { return model.loss(model.forward(input_ids), labels); }, max_grad_norm,
      after_sync);
}

TensorParallelStepResult tensor_parallel_step(TensorParallelGpt2Impl& model, torch::optim::Optimizer& optimizer,
                                              Grid& grid, const std::function<torch::Tensor()>& loss_of_batch,
                                              double max_grad_norm, const AfterGradientSync& after_sync) {
  TensorParallelStepResult result;
  const torch::Tensor loss = loss_of_batch();
  loss.backward();
  result.loss = loss.item<double>();
  average_gradients_over_data(model, grid);
  if (after_sync) after_sync(model);
  result.grad_norm = max_grad_norm > 0 ? clip_tensor_parallel_gradients(model, grid, max_grad_norm)
                                       : tensor_parallel_gradient_norm(model, grid);
  optimizer.step();
  model.zero_grad(/*set_to_none=*/true);
  torch::Tensor mean = torch::full({1}, result.loss, torch::kDouble);
  if (grid.dp() > 1) {
    grid.data().all_reduce(mean, dist::ReduceOp::SUM, "tp loss over data");
    mean.div_(grid.dp());
  }
  result.global_loss = mean.item<double>();
  return result;
}

}  // namespace dtlab::tp
