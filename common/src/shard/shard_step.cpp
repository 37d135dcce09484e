// The sharded training step, see shard/shard_step.h.
#include "dtlab/shard/shard_step.h"

#include <ATen/record_function.h>
#include <torch/utils.h>

#include <fmt/format.h>

#include <string>

#include "dtlab/core/error.h"
#include "dtlab/report/profile.h"

namespace dtlab::shard {

void clip_shard_gradients(std::vector<ShardUnit>& units, double max_norm, dist::Group& group, bool replicated) {
  torch::NoGradGuard no_grad;
  torch::Tensor squared = torch::zeros({1});
  for (const ShardUnit& unit : units) squared += unit.shard_gradients.pow(2).sum();
  if (!replicated) group.all_reduce(squared, dist::ReduceOp::SUM, "gradient norm");
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

std::map<std::string, torch::Tensor> whole_gradients(const std::vector<ShardUnit>& units, dist::Group& group,
                                                     bool replicated) {
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> named;
  for (const ShardUnit& unit : units) {
    const torch::Tensor flat = replicated ? unit.shard_gradients
                                          : torch::cat(group.all_gather(unit.shard_gradients, "dump gradients " + unit.name));
    for (const FlatSegment& s : unit.flat->segments()) named[s.name] = flat.narrow(0, s.offset, s.numel).view(s.shape).clone();
  }
  return named;
}

namespace {

// FSDP's freed units (FlatParameters::free_values) have storage of 0 bytes, and LibTorch names
// only the tensor's sizes when something reads them. Said in the strategy's terms instead.
template <typename F>
auto reading_freed_units(const char* when, int rank, F&& f) {
  try {
    return f();
  } catch (const c10::Error& e) {
    if (std::string(e.what_without_backtrace()).find("storage of size 0") == std::string::npos) throw;
    throw Error(fmt::format("rank {}: the {} read parameters of a unit that was freed (its memory given back by "
                            "free_values): every unit a stage reads must be gathered before the stage's forward, "
                            "and again before its backward (LibTorch: {})", rank, when, e.what_without_backtrace()));
  }
}

}  // namespace

train::StepFunction sharded_step(ShardStrategy& strategy, const ShardContext& context, UnitGradientHooks* meter,
                                 AfterReduce after_reduce) {
  return [&strategy, context, meter, after_reduce](train::TrainState& state, const train::StepInput& input) {
    state.module->train();
    const int rank = context.group->rank();
    // What the ranks wait for: every receive and all-reduce of the step (FSDP's gathers in the
    // forward, ZeRO-2's reductions inside backward, ZeRO-1's after it), from the kit's log.
    const dist::CommLog& log = context.group->log();
    const double waited_before = log.seconds("recv") + log.seconds("all_reduce");
    const torch::Tensor loss = reading_freed_units("forward", rank, [&] { return state.loss(*input.batch); });
    if (meter) meter->arm();
    strategy.before_backward();
    reading_freed_units("backward", rank, [&] {
      loss.backward();
      return 0;
    });
    train::StepResult result;
    strategy.after_backward();
    if (meter) meter->sample();
    if (after_reduce) after_reduce(input);
    {
      RECORD_USER_SCOPE(report::kUpdateScope);
      if (state.max_grad_norm > 0) {
        clip_shard_gradients(*context.units, state.max_grad_norm, *context.group, context.replicated);
      }
      state.optimizer->step();
      state.scheduler->step();
    }
    strategy.after_update();
    state.module->zero_grad(/*set_to_none=*/true);
    result.comm_seconds = log.seconds("recv") + log.seconds("all_reduce") - waited_before;
    result.loss = loss.item<float>();
    return result;
  };
}

}  // namespace dtlab::shard
