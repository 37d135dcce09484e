// DistributedSampler semantics, see data/sampler.h.
#include "dtlab/data/sampler.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <string>

#include "dtlab/core/error.h"

namespace dtlab::data {

std::vector<int64_t> shard_indices(const SamplerOptions& o, int64_t epoch) {
  if (o.dataset_size <= 0) throw Error("cannot sample from an empty data set");
  if (o.world_size <= 0 || o.rank < 0 || o.rank >= o.world_size) {
    throw Error("invalid rank " + std::to_string(o.rank) + " for world size " +
                std::to_string(o.world_size));
  }
  std::vector<int64_t> order(o.dataset_size);
  if (o.shuffle) {
    order = shuffled_indices(o.dataset_size, o.seed + static_cast<uint64_t>(epoch));
  } else {
    for (int64_t i = 0; i < o.dataset_size; ++i) order[i] = i;
  }
  const int64_t per_rank = (o.dataset_size + o.world_size - 1) / o.world_size;
  const int64_t total = per_rank * o.world_size;
  for (int64_t i = o.dataset_size; i < total; ++i) order.push_back(order[i - o.dataset_size]);
  std::vector<int64_t> shard;
  shard.reserve(per_rank);
  for (int64_t i = o.rank; i < total; i += o.world_size) shard.push_back(order[i]);
  return shard;
}

std::vector<int64_t> shuffled_indices(int64_t n, uint64_t seed) {
  if (n < 0) throw Error("shuffled_indices: n must not be negative, got " + std::to_string(n));
  at::Generator generator = at::detail::createCPUGenerator(seed);
  const torch::Tensor perm = torch::randperm(n, generator, torch::kInt64);
  return {perm.data_ptr<int64_t>(), perm.data_ptr<int64_t>() + n};
}

std::vector<std::vector<int64_t>> minibatches(const std::vector<int64_t>& indices,
                                              int64_t batch_size) {
  if (batch_size <= 0) throw Error("batch size must be positive, got " + std::to_string(batch_size));
  std::vector<std::vector<int64_t>> batches;
  for (size_t start = 0; start < indices.size(); start += batch_size) {
    const size_t end = std::min(indices.size(), start + static_cast<size_t>(batch_size));
    batches.emplace_back(indices.begin() + start, indices.begin() + end);
  }
  return batches;
}

}  // namespace dtlab::data
