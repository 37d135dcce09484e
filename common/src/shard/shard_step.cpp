// The sharded training step, see shard/shard_step.h.
#include "dtlab/shard/shard_step.h"

#include <ATen/record_function.h>
#include <torch/utils.h>

#include "dtlab/report/profile.h"

namespace dtlab::shard {

void clip_shard_gradients(std::vector<ShardUnit>& units, double max_norm, dist::Group& group) {
  torch::NoGradGuard no_grad;
  torch::Tensor squared = torch::zeros({1});
  for (const ShardUnit& unit : units) squared += unit.shard_gradients.pow(2).sum();
  group.all_reduce(squared, dist::ReduceOp::SUM, "gradient norm");
  const torch::Tensor total = squared.sqrt();
  const torch::Tensor coefficient = (max_norm / (total + 1e-6)).clamp_max(1.0);
  for (ShardUnit& unit : units) unit.shard_gradients.mul_(coefficient);
}

void gather_units(std::vector<ShardUnit>& units, dist::Group& group) {
  torch::NoGradGuard no_grad;
  for (ShardUnit& unit : units) {
    const std::vector<torch::Tensor> pieces = group.all_gather(unit.shard_values, "gather " + unit.name);
    unit.flat->allocate_values();
    for (int r = 0; r < group.size(); ++r) unit.flat->shard(unit.flat->values(), r).copy_(pieces[static_cast<size_t>(r)]);
  }
}

train::StepFunction sharded_step(ShardStrategy& strategy, const ShardContext& context, UnitGradientHooks* meter) {
  return [&strategy, context, meter](train::TrainState& state, const train::StepInput& input) {
    state.module->train();
    const torch::Tensor loss = state.loss(*input.batch);
    if (meter) meter->arm();
    strategy.before_backward();
    loss.backward();
    train::StepResult result;
    {
      // What the ranks wait for: the strategy's collectives (overlap is FSDP's stretch, measured
      // on the timeline, not here).
      const auto start = std::chrono::steady_clock::now();
      strategy.after_backward();
      if (meter) meter->sample();
      result.comm_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    {
      RECORD_USER_SCOPE(report::kUpdateScope);
      if (state.max_grad_norm > 0) clip_shard_gradients(*context.units, state.max_grad_norm, *context.group);
      state.optimizer->step();
      state.scheduler->step();
    }
    strategy.after_update();
    state.module->zero_grad(/*set_to_none=*/true);
    result.loss = loss.item<float>();
    return result;
  };
}

}  // namespace dtlab::shard
