// AdamW parameter groups and the linear warmup schedule, see train/optimizer.h.
#include "dtlab/train/optimizer.h"

#include <algorithm>

#include "dtlab/core/error.h"

namespace dtlab::train {
bool exempt_from_weight_decay(const torch::Tensor& parameter) { return parameter.dim() < 2; }

int64_t optimizer_state_bytes(const torch::optim::Optimizer& optimizer) {
  int64_t total = 0;
  for (const auto& entry : optimizer.state()) {
    if (const auto* adamw = dynamic_cast<const torch::optim::AdamWParamState*>(entry.second.get())) {
      for (const torch::Tensor* t : {&adamw->exp_avg(), &adamw->exp_avg_sq(), &adamw->max_exp_avg_sq()}) {
        if (t->defined()) total += t->numel() * static_cast<int64_t>(t->element_size());
      }
    }
  }
  return total;
}

std::unique_ptr<torch::optim::AdamW> make_adamw(const torch::nn::Module& model,
                                                const OptimizerOptions& o) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    if (!item.value().requires_grad()) continue;
    (exempt_from_weight_decay(item.value()) ? no_decay : decay).push_back(item.value());
  }
  return make_adamw(std::move(decay), std::move(no_decay), o);
}

std::unique_ptr<torch::optim::AdamW> make_adamw(std::vector<torch::Tensor> decay, std::vector<torch::Tensor> no_decay,
                                                const OptimizerOptions& o) {
  if (!(o.learning_rate > 0)) throw Error("--learning_rate must be positive");
  if (o.weight_decay < 0) throw Error("--weight_decay must not be negative");
  auto options = [&](double weight_decay) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(o.learning_rate).eps(o.adam_epsilon).weight_decay(weight_decay));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::move(decay), options(o.weight_decay));
  groups.emplace_back(std::move(no_decay), options(0.0));
  return std::make_unique<AdamW>(
      groups, torch::optim::AdamWOptions(o.learning_rate).eps(o.adam_epsilon));
}

LinearWarmupSchedule::LinearWarmupSchedule(torch::optim::Optimizer& optimizer,
                                           int64_t warmup_steps, int64_t total_steps)
    : optimizer_(optimizer), warmup_steps_(warmup_steps), total_steps_(total_steps) {
  if (warmup_steps < 0) throw Error("--warmup_steps must not be negative");
  for (auto& group : optimizer_.param_groups()) base_lrs_.push_back(group.options().get_lr());
  apply();
}

double LinearWarmupSchedule::factor(int64_t step) const {
  if (step < warmup_steps_) return double(step) / double(std::max<int64_t>(1, warmup_steps_));
  return std::max(0.0, double(total_steps_ - step) /
                           double(std::max<int64_t>(1, total_steps_ - warmup_steps_)));
}

void LinearWarmupSchedule::step() {
  ++step_;
  apply();
}

double LinearWarmupSchedule::last_lr() const {
  return optimizer_.param_groups().front().options().get_lr();
}

void LinearWarmupSchedule::apply() {
  auto& groups = optimizer_.param_groups();
  for (size_t i = 0; i < groups.size(); ++i) groups[i].options().set_lr(base_lrs_[i] * factor(step_));
}

}  // namespace dtlab::train
