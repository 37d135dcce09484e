// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
// dp: data parallelism for GPT-2: each rank trains on its own part of the data set and the ranks
// average their gradients after every backward. dtlab/tasks/dp.h is the specification;
// handouts/dp.md the explanation.
#include <string>

#include "dtlab/core/error.h"
#include "dtlab/data/sampler.h"
#include "dtlab/tasks/dp.h"

namespace dtlab::dp {

int64_t Partition::size() const {
  // TODO(dp): the partition holds as many examples as it has indices.
  throw dtlab::NotImplemented("TODO(dp): the partition holds as many examples as it has indices.");
}

data::Batch Partition::batch(const std::vector<int64_t>& rows) const {
  // TODO(dp): map each row (a position in the partition) to its index in the data set, and return the data set's minibatch of those examples.
  throw dtlab::NotImplemented("TODO(dp): map each row (a position in the partition) to its index in the data set, and return the data set's minibatch of those examples.");
}

DataPartitioner::DataPartitioner(const train::Dataset& data, const std::vector<double>& sizes, uint64_t seed)
    : data_(&data) {
  // TODO(dp): shuffle the indices 0..N-1 with data::shuffled_indices(N, seed), then cut them into consecutive parts of int(fraction * N) indices, one per fraction in sizes.
  throw dtlab::NotImplemented("TODO(dp): shuffle the indices 0..N-1 with data::shuffled_indices(N, seed), then cut them into consecutive parts of int(fraction * N) indices, one per fraction in sizes.");
}

Partition DataPartitioner::use(int k) const {
  // TODO(dp): return partition k as a Partition of the data set (a dtlab::Error when k names no partition).
  throw dtlab::NotImplemented("TODO(dp): return partition k as a Partition of the data set (a dtlab::Error when k names no partition).");
}

PartitionLoader partition_dataset(int rank, int world_size, const train::Dataset& dataset, int64_t batch_size,
                                  uint64_t seed) {
  // TODO(dp): cut the data set into world_size equal fractions with the seed, take part `rank`, and read batch_size / world_size examples per step.
  throw dtlab::NotImplemented("TODO(dp): cut the data set into world_size equal fractions with the seed, take part `rank`, and read batch_size / world_size examples per step.");
}

std::unique_ptr<dist::Group> setup(const dist::Settings& settings) {
  // TODO(dp): set up the process group: join the run described by settings with dist::init_process_group.
  throw dtlab::NotImplemented("TODO(dp): set up the process group: join the run described by settings with dist::init_process_group.");
}

void average_gradients(torch::nn::Module& model, dist::Group& group) {
  // TODO(dp): for every parameter with a gradient: all_reduce it with SUM, then divide it by the world size.
  throw dtlab::NotImplemented("TODO(dp): for every parameter with a gradient: all_reduce it with SUM, then divide it by the world size.");
}

}  // namespace dtlab::dp
