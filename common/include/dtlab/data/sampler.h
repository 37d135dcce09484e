// Which examples each rank reads in an epoch: PyTorch's DistributedSampler, exactly.
#pragma once

#include <cstdint>
#include <vector>

namespace dtlab::data {

struct SamplerOptions {
  int64_t dataset_size = 0;
  int world_size = 1;
  int rank = 0;
  bool shuffle = true;
  uint64_t seed = 0;
};

// The indices rank `rank` reads in `epoch`, in order. Like torch.utils.data.DistributedSampler
// (drop_last=False): a permutation of 0..N-1 drawn from a generator seeded with seed + epoch
// (the same permutation PyTorch draws), padded by repeating its start until its length is a
// multiple of world_size, then every world_size-th index from position rank. The shards of all
// ranks are disjoint but for the padding and together cover the data set. With world_size 1 this
// is run_glue's RandomSampler. Invalid options are a dtlab::Error.
std::vector<int64_t> shard_indices(const SamplerOptions& options, int64_t epoch);

// 0..n-1 in a random order drawn from seed: the permutation torch.randperm(n) draws from a
// generator seeded with seed. The same seed gives the same order on every rank and every run.
std::vector<int64_t> shuffled_indices(int64_t n, uint64_t seed);

// Splits indices into consecutive minibatches of batch_size; the last one may be smaller.
std::vector<std::vector<int64_t>> minibatches(const std::vector<int64_t>& indices,
                                              int64_t batch_size);

}  // namespace dtlab::data
