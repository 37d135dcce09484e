// Deliberately broken precision solutions, one per mistake, chosen at run time by DTLAB_MUTANT (unset:
// correct, solutions/precision's code). grader_mutants_test grades each and expects the check that
// should catch it to fail with the right words; keeps_activations is right in every number and
// misses the exercise's point (it recomputes nothing and keeps every activation).
// Test code: never part of a student release.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/autograd.h>

#include <cstdlib>
#include <string>

#include "dtlab/core/error.h"
#include "dtlab/dist/group.h"
#include "dtlab/tasks/precision.h"

namespace dtlab::precision {
namespace {

bool mutant(const char* name) {
  const char* m = std::getenv("DTLAB_MUTANT");
  return m && std::string(m) == name;
}

constexpr const char* kRngKey = "rng_state";
constexpr const char* kOutputKey = "kept_output";

at::Generator generator() { return at::detail::getDefaultCPUGenerator(); }

torch::Tensor rng_state() {
  at::Generator g = generator();
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.get_state();
}

void set_rng_state(const torch::Tensor& state) {
  at::Generator g = generator();
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_state(state);
}

}  // namespace

torch::Tensor CheckpointedBlock::forward(AutogradContext* ctx, const BlockForward* block,
                                         const torch::Tensor& hidden) {
  save_block(ctx, block);
  if (mutant("keeps_activations")) {
    // The block's graph recorded and kept for backward: the same numbers, nothing saved.
    const torch::Tensor input = hidden.detach().requires_grad_(true);
    torch::Tensor output;
    {
      torch::AutoGradMode record(true);
      output = (*block)(input);
    }
    ctx->saved_data["kept_input"] = input;
    ctx->saved_data[kOutputKey] = output;
    return output.detach();
  }
  ctx->save_for_backward({hidden});
  ctx->saved_data[kRngKey] = rng_state();
  torch::NoGradGuard no_graph;
  return (*block)(hidden);
}

variable_list CheckpointedBlock::backward(AutogradContext* ctx, variable_list grad_outputs) {
  const BlockForward& block = saved_block(ctx);
  if (mutant("keeps_activations")) {
    const torch::Tensor input = ctx->saved_data["kept_input"].toTensor();
    torch::autograd::backward({ctx->saved_data[kOutputKey].toTensor()}, {grad_outputs[0]});
    return {torch::Tensor(), input.grad()};
  }
  const torch::Tensor input = ctx->get_saved_variables()[0].detach().requires_grad_(true);
  const torch::Tensor now = rng_state();
  // rng_not_restored: the recompute draws fresh dropout masks, not the forward's.
  if (!mutant("rng_not_restored")) set_rng_state(ctx->saved_data[kRngKey].toTensor());
  torch::Tensor output;
  {
    torch::AutoGradMode record(true);
    output = block(input);
  }
  set_rng_state(now);
  torch::autograd::backward({output}, {grad_outputs[0]});
  return {torch::Tensor(), input.grad()};
}

bool is_checkpointed(int64_t block, int64_t every) {
  // every_off_by_one: blocks every - 1, 2 * every - 1, ...
  if (mutant("every_off_by_one")) return every > 0 && block % every == every - 1;
  return every > 0 && block % every == 0;
}

void refresh_compute_weights(const std::vector<torch::Tensor>& masters, const std::vector<torch::Tensor>& compute) {
  if (masters.size() != compute.size()) throw Error("refresh_compute_weights: masters and compute copies differ in number");
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < masters.size(); ++i) {
    // masters_in_bf16: the masters rounded to bf16 too, as if they were kept in bf16.
    if (mutant("masters_in_bf16")) masters[i].copy_(masters[i].to(torch::kBFloat16));
    compute[i].copy_(masters[i]);
  }
}

void accumulate_master_gradients(const std::vector<torch::Tensor>& compute, const std::vector<torch::Tensor>& masters) {
  if (masters.size() != compute.size()) {
    throw Error("accumulate_master_gradients: masters and compute copies differ in number");
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < masters.size(); ++i) {
    torch::Tensor master = masters[i];
    const torch::Tensor g = compute[i].grad();
    if (!g.defined()) continue;
    if (master.grad().defined() && !mutant("last_micro_batch_only")) {
      master.mutable_grad().add_(g.to(torch::kFloat32));
    } else {
      master.mutable_grad() = g.to(torch::kFloat32);
    }
    compute[i].mutable_grad().zero_();
  }
}

DynamicLossScaler::DynamicLossScaler(LossScalerOptions options) : options_(options), scale_(options.initial_scale) {}

bool DynamicLossScaler::found_overflow(const std::vector<torch::Tensor>& half_grads, dist::Group& group) {
  bool mine = false;
  for (const torch::Tensor& g : half_grads) {
    if (!torch::isfinite(g).all().item<bool>()) {
      mine = true;
      break;
    }
  }
  // decides_alone: each rank's own answer, never agreed.
  if (mutant("decides_alone")) return mine;
  torch::Tensor any = torch::full({1}, mine ? 1.0f : 0.0f);
  group.all_reduce(any, dist::ReduceOp::MAX, "loss scaler overflow");
  return any.item<float>() > 0;
}

void DynamicLossScaler::unscale(const std::vector<torch::Tensor>& half_grads,
                                const std::vector<torch::Tensor>& masters) const {
  if (half_grads.size() != masters.size()) throw Error("unscale: half gradients and masters differ in number");
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < masters.size(); ++i) {
    // not_unscaled: the sum left scaled (AdamW and the clip hide it in the losses).
    if (mutant("not_unscaled")) {
      masters[i].mutable_grad().copy_(half_grads[i]);
      continue;
    }
    masters[i].mutable_grad().copy_(half_grads[i].to(torch::kFloat32).div_(scale_));
  }
}

void DynamicLossScaler::update(bool overflow) {
  if (overflow) {
    scale_ *= options_.backoff_factor;
    good_steps_ = 0;
    return;
  }
  // never_grows: good steps counted, the scale never raised.
  if (++good_steps_ >= options_.growth_interval) {
    if (!mutant("never_grows")) scale_ *= options_.growth_factor;
    good_steps_ = 0;
  }
}

}  // namespace dtlab::precision
