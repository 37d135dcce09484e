// dp: data parallelism for GPT-2: each rank trains on its own part of the data set and the ranks
// average their gradients after every backward. dtlab/tasks/dp.h is the specification;
// handouts/dp.md the explanation.
#include <string>

#include "dtlab/core/error.h"
#include "dtlab/data/sampler.h"
#include "dtlab/tasks/dp.h"

namespace dtlab::dp {

int64_t Partition::size() const {
  // BEGIN TODO(dp): the partition holds as many examples as it has indices.
  return static_cast<int64_t>(indices_.size());
  // END TODO
}

data::Batch Partition::batch(const std::vector<int64_t>& rows) const {
  // BEGIN TODO(dp): map each row (a position in the partition) to its index in the data set, and return the data set's minibatch of those examples.
  std::vector<int64_t> examples;
  examples.reserve(rows.size());
  for (int64_t row : rows) examples.push_back(indices_.at(static_cast<size_t>(row)));
  return data_->batch(examples);
  // END TODO
}

DataPartitioner::DataPartitioner(const train::Dataset& data, const std::vector<double>& sizes, uint64_t seed)
    : data_(&data) {
  // BEGIN TODO(dp): shuffle the indices 0..N-1 with data::shuffled_indices(N, seed), then cut them into consecutive parts of int(fraction * N) indices, one per fraction in sizes.
  const int64_t n = data.size();
  const std::vector<int64_t> shuffled = data::shuffled_indices(n, seed);
  size_t start = 0;
  for (double fraction : sizes) {
    const auto length = static_cast<size_t>(fraction * static_cast<double>(n));
    partitions_.emplace_back(shuffled.begin() + start, shuffled.begin() + start + length);
    start += length;
  }
  // END TODO
}

Partition DataPartitioner::use(int k) const {
  // BEGIN TODO(dp): return partition k as a Partition of the data set (a dtlab::Error when k names no partition).
  if (k < 0 || k >= static_cast<int>(partitions_.size())) {
    throw Error("DataPartitioner::use(" + std::to_string(k) + "): there are " +
                std::to_string(partitions_.size()) + " partitions");
  }
  return Partition(*data_, partitions_[static_cast<size_t>(k)]);
  // END TODO
}

PartitionLoader partition_dataset(int rank, int world_size, const train::Dataset& dataset, int64_t batch_size,
                                  uint64_t seed) {
  // BEGIN TODO(dp): cut the data set into world_size equal fractions with the seed, take part `rank`, and read batch_size / world_size examples per step.
  const std::vector<double> sizes(static_cast<size_t>(world_size), 1.0 / world_size);
  const DataPartitioner partitioner(dataset, sizes, seed);
  return {partitioner.use(rank), batch_size / world_size};
  // END TODO
}

std::unique_ptr<dist::Group> setup(const dist::Settings& settings) {
  // BEGIN TODO(dp): set up the process group: join the run described by settings with dist::init_process_group.
  return dist::init_process_group(settings);
  // END TODO
}

void average_gradients(torch::nn::Module& model, dist::Group& group) {
  // BEGIN TODO(dp): for every parameter with a gradient: all_reduce it with SUM, then divide it by the world size.
  for (auto& p : model.parameters()) {
    if (!p.grad().defined()) continue;
    group.all_reduce(p.mutable_grad(), dist::ReduceOp::SUM, "gradients");
    p.mutable_grad().div_(group.size());
  }
  // END TODO
}

}  // namespace dtlab::dp
