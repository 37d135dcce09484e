// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
// precision, part 2: bf16 compute on a copy of fp32 master weights (dtlab/tasks/precision.h).
#include "dtlab/tasks/precision.h"

#include <cstddef>

#include "dtlab/core/error.h"

namespace dtlab::precision {

void refresh_compute_weights(const std::vector<torch::Tensor>& masters, const std::vector<torch::Tensor>& compute) {
  if (masters.size() != compute.size()) throw Error("refresh_compute_weights: masters and compute copies differ in number");
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < masters.size(); ++i) {
    // TODO(precision): the master's value, rounded to the compute copy's dtype, into the compute copy, in place.
    throw dtlab::NotImplemented("TODO(precision): the master's value, rounded to the compute copy's dtype, into the compute copy, in place.");
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
    // TODO(precision): add the bf16 gradient g into masters[i]'s gradient in fp32 (it becomes g, in fp32, when undefined), then zero the compute gradient.
    throw dtlab::NotImplemented("TODO(precision): add the bf16 gradient g into masters[i]'s gradient in fp32 (it becomes g, in fp32, when undefined), then zero the compute gradient.");
  }
}

}  // namespace dtlab::precision
