// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
// precision, part 3: fp16 gradients with a dynamic loss scaler (dtlab/tasks/precision.h).
#include "dtlab/tasks/precision.h"

#include <cstddef>

#include "dtlab/core/error.h"
#include "dtlab/dist/group.h"

namespace dtlab::precision {

DynamicLossScaler::DynamicLossScaler(LossScalerOptions options) : options_(options), scale_(options.initial_scale) {}

bool DynamicLossScaler::found_overflow(const std::vector<torch::Tensor>& half_grads, dist::Group& group) {
  // TODO(precision): 1 if any of this rank's gradients holds an inf or a NaN, else 0; the maximum over the group (one all-reduce, MAX), so that every rank decides the same.
  throw dtlab::NotImplemented("TODO(precision): 1 if any of this rank's gradients holds an inf or a NaN, else 0; the maximum over the group (one all-reduce, MAX), so that every rank decides the same.");
}

void DynamicLossScaler::unscale(const std::vector<torch::Tensor>& half_grads,
                                const std::vector<torch::Tensor>& masters) const {
  if (half_grads.size() != masters.size()) throw Error("unscale: half gradients and masters differ in number");
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < masters.size(); ++i) {
    // TODO(precision): the summed fp16 gradient in fp32, divided by the scale, into the master's gradient.
    throw dtlab::NotImplemented("TODO(precision): the summed fp16 gradient in fp32, divided by the scale, into the master's gradient.");
  }
}

void DynamicLossScaler::update(bool overflow) {
  // TODO(precision): back off and start counting again after an overflow; otherwise count the good step and grow the scale after growth_interval of them in a row.
  throw dtlab::NotImplemented("TODO(precision): back off and start counting again after an overflow; otherwise count the good step and grow the scale after growth_interval of them in a row.");
}

}  // namespace dtlab::precision
