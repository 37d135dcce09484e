// precision, part 2: bf16 compute on a copy of fp32 master weights (dtlab/tasks/precision.h).
#include "dtlab/tasks/precision.h"

#include <cstddef>

#include "dtlab/core/error.h"

namespace dtlab::precision {

void refresh_compute_weights(const std::vector<torch::Tensor>& masters, const std::vector<torch::Tensor>& compute) {
  if (masters.size() != compute.size()) throw Error("refresh_compute_weights: masters and compute copies differ in number");
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < masters.size(); ++i) {
    // BEGIN TODO(precision): the master's value, rounded to the compute copy's dtype, into the compute copy, in place.
    compute[i].copy_(masters[i]);
    // END TODO
  }
}

void accumulate_master_gradients(const std::vector<torch::Tensor>& compute, const std::vector<torch::Tensor>& masters) {
  if (masters.size() != compute.size()) {
    throw Error("accumulate_master_gradients: masters and compute copies differ in number");
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < masters.size(); ++i) {
    const torch::Tensor g = compute[i].grad();
    if (!g.defined()) continue;  // a parameter this micro-batch did not reach
    // BEGIN TODO(precision): add the bf16 gradient g into masters[i]'s gradient in fp32 (it becomes g, in fp32, when undefined), then zero the compute gradient.
    torch::Tensor master = masters[i];
    if (master.grad().defined()) {
      master.mutable_grad().add_(g.to(torch::kFloat32));
    } else {
      master.mutable_grad() = g.to(torch::kFloat32);
    }
    compute[i].mutable_grad().zero_();
    // END TODO
  }
}

}  // namespace dtlab::precision
