// precision, part 3: fp16 gradients with a dynamic loss scaler (dtlab/tasks/precision.h).
#include "dtlab/tasks/precision.h"

#include <cstddef>

#include "dtlab/core/error.h"
#include "dtlab/dist/group.h"

namespace dtlab::precision {

DynamicLossScaler::DynamicLossScaler(LossScalerOptions options) : options_(options), scale_(options.initial_scale) {}

bool DynamicLossScaler::found_overflow(const std::vector<torch::Tensor>& half_grads, dist::Group& group) {
  // BEGIN TODO(precision): 1 if any of this rank's gradients holds an inf or a NaN, else 0; the maximum over the group (one all-reduce, MAX), so that every rank decides the same.
  bool mine = false;
  for (const torch::Tensor& g : half_grads) {
    if (!torch::isfinite(g).all().item<bool>()) {
      mine = true;
      break;
    }
  }
  torch::Tensor any = torch::full({1}, mine ? 1.0f : 0.0f);
  group.all_reduce(any, dist::ReduceOp::MAX, "loss scaler overflow");
  return any.item<float>() > 0;
  // END TODO
}

void DynamicLossScaler::unscale(const std::vector<torch::Tensor>& half_grads,
                                const std::vector<torch::Tensor>& masters) const {
  if (half_grads.size() != masters.size()) throw Error("unscale: half gradients and masters differ in number");
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < masters.size(); ++i) {
    // BEGIN TODO(precision): the summed fp16 gradient in fp32, divided by the scale, into the master's gradient.
    masters[i].mutable_grad().copy_(half_grads[i].to(torch::kFloat32).div_(scale_));
    // END TODO
  }
}

void DynamicLossScaler::update(bool overflow) {
  // BEGIN TODO(precision): back off and start counting again after an overflow; otherwise count the good step and grow the scale after growth_interval of them in a row.
  if (overflow) {
    scale_ *= options_.backoff_factor;
    good_steps_ = 0;
    return;
  }
  if (++good_steps_ >= options_.growth_interval) {
    scale_ *= options_.growth_factor;
    good_steps_ = 0;
  }
  // END TODO
}

}  // namespace dtlab::precision
