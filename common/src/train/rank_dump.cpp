// Writes a rank's parameters, gradients and data shard for the grader, see train/rank_dump.h.
#include "dtlab/train/rank_dump.h"

#include <torch/types.h>

namespace dtlab::train {

std::filesystem::path rank_dump_path(const std::filesystem::path& dir, int rank) {
  return dir / ("rank" + std::to_string(rank) + ".safetensors");
}

void write_rank_dump(const std::filesystem::path& dir, const torch::nn::Module& model,
                     const RankDump& info) {
  io::TensorMap tensors;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const torch::Tensor& p = item.value();
    tensors["param." + item.key()] = p.detach().clone();
    if (p.grad().defined()) tensors["grad." + item.key()] = p.grad().detach().clone();
  }
  tensors["shard"] = torch::tensor(info.shard, torch::kInt64);
  tensors["batch"] = torch::tensor(info.batch, torch::kInt64);
  std::filesystem::create_directories(dir);
  io::save_safetensors(rank_dump_path(dir, info.rank), tensors,
                       {{"rank", std::to_string(info.rank)},
                        {"world_size", std::to_string(info.world_size)},
                        {"step", std::to_string(info.step)},
                        {"global_batch_size", std::to_string(info.global_batch_size)}});
}

AfterSync rank_dump_hook(std::filesystem::path dir, int dump_step, int rank, int world,
                         int64_t global_batch_size, std::vector<int64_t> shard,
                         std::vector<int64_t> example_of_row) {
  return [=](const StepInput& input, const torch::nn::Module& model) {
    if (input.step != dump_step) return;
    std::vector<int64_t> batch = *input.rows;
    if (!example_of_row.empty()) {
      for (int64_t& row : batch) row = example_of_row.at(static_cast<size_t>(row));
    }
    write_rank_dump(dir, model, {rank, world, dump_step, global_batch_size, shard, batch});
  };
}

}  // namespace dtlab::train
