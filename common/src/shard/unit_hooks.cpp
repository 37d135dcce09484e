// When backward has finished a unit, see shard/unit_hooks.h.
#include "dtlab/shard/unit_hooks.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "dtlab/core/error.h"

namespace dtlab::shard {

UnitGradientHooks::UnitGradientHooks(std::vector<ShardUnit>& units, std::function<void(ShardUnit&)> ready)
    : units_(units), ready_(std::move(ready)), waiting_(units.size(), 0) {
  for (size_t u = 0; u < units_.size(); ++u) {
    for (const torch::Tensor& p : units_[u].flat->parameters()) {
      auto accumulator = torch::autograd::impl::grad_accumulator(p);
      std::weak_ptr<bool> alive = alive_;
      hook_keys_.push_back(accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
          [this, u, alive](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
            if (alive.lock()) accumulated(u);
            return outputs;
          })));
      accumulators_.push_back(std::move(accumulator));  // keeps the node (and the hook) alive
    }
  }
  arm();
}

UnitGradientHooks::~UnitGradientHooks() {
  *alive_ = false;
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
}

void UnitGradientHooks::arm() {
  for (size_t u = 0; u < units_.size(); ++u) waiting_[u] = units_[u].flat->parameters().size();
}

std::vector<std::string> UnitGradientHooks::not_ready() const {
  std::vector<std::string> names;
  for (size_t u = 0; u < units_.size(); ++u) {
    if (waiting_[u] != 0) names.push_back(units_[u].name);
  }
  return names;
}

void UnitGradientHooks::expect_every_unit_ready(int rank) const {
  const std::vector<std::string> missing = not_ready();
  if (!missing.empty()) {
    throw Error(fmt::format("rank {}: backward gave no gradient to every parameter of {}: their pieces were never "
                            "reduced", rank, fmt::join(missing, ", ")));
  }
}

void UnitGradientHooks::sample() {
  int64_t bytes = 0;
  for (const ShardUnit& unit : units_) {
    for (const torch::Tensor& p : unit.flat->parameters()) {
      if (p.grad().defined()) bytes += p.grad().numel() * static_cast<int64_t>(p.grad().element_size());
    }
    const torch::Tensor& flat = unit.flat->gradients();
    if (flat.defined()) bytes += flat.numel() * static_cast<int64_t>(flat.element_size());
  }
  peak_bytes_ = std::max(peak_bytes_, bytes);
  int64_t parameters = 0;
  for (const ShardUnit& unit : units_) {
    if (unit.flat->values_allocated()) parameters += unit.flat->layout().padded_numel() * static_cast<int64_t>(sizeof(float));
  }
  peak_parameter_bytes_ = std::max(peak_parameter_bytes_, parameters);
}

void UnitGradientHooks::accumulated(size_t unit) {
  sample();
  if (waiting_[unit] == 0 || --waiting_[unit] != 0) return;
  if (ready_) ready_(units_[unit]);
}

}  // namespace dtlab::shard
