// Writes a rank's parameters, gradients and examples for the grader, see train/rank_dump.h.
#include "dtlab/train/rank_dump.h"

#include <torch/types.h>

namespace dtlab::train {

std::filesystem::path rank_dump_path(const std::filesystem::path& dir, int rank, DumpPoint point) {
  return dir / ("rank" + std::to_string(rank) + (point == DumpPoint::kBeforeStep ? ".start" : "") + ".safetensors");
}

void write_rank_dump(const RankDumpPlan& plan, DumpPoint point, const torch::nn::Module& model,
                     const std::vector<int64_t>& rows) {
  io::TensorMap tensors;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const torch::Tensor& p = item.value();
    tensors["param." + item.key()] = p.detach().clone();
    if (point == DumpPoint::kAfterSync && p.grad().defined()) tensors["grad." + item.key()] = p.grad().detach().clone();
  }
  write_rank_dump(plan, point, std::move(tensors), rows);
}

void write_rank_dump(const RankDumpPlan& plan, DumpPoint point, io::TensorMap tensors,
                     const std::vector<int64_t>& rows) {
  std::vector<int64_t> batch = rows;
  if (!plan.example_of_row.empty()) {
    for (int64_t& row : batch) row = plan.example_of_row.at(static_cast<size_t>(row));
  }
  tensors["shard"] = torch::tensor(plan.shard, torch::kInt64);
  tensors["batch"] = torch::tensor(batch, torch::kInt64);
  std::filesystem::create_directories(plan.dir);
  io::save_safetensors(rank_dump_path(plan.dir, plan.rank, point), tensors,
                       {{"rank", std::to_string(plan.rank)},
                        {"world_size", std::to_string(plan.world_size)},
                        {"step", std::to_string(plan.step)},
                        {"global_batch_size", std::to_string(plan.global_batch_size)}});
}

StepFunction step_with_rank_dumps(GradientSync& sync, RankDumpPlan plan) {
  auto shared = std::make_shared<const RankDumpPlan>(std::move(plan));
  const AfterSync after_sync = [shared](const StepInput& input, const torch::nn::Module& model) {
    if (input.step == shared->step) write_rank_dump(*shared, DumpPoint::kAfterSync, model, *input.rows);
  };
  return [&sync, shared, after_sync](TrainState& state, const StepInput& input) {
    if (input.step == shared->step) write_rank_dump(*shared, DumpPoint::kBeforeStep, *state.module, *input.rows);
    return training_step(state, input, sync, after_sync);
  };
}

}  // namespace dtlab::train
