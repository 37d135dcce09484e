// Deliberately broken dp solutions, one per mistake students make, chosen at run time by
// DTLAB_MUTANT (unset: correct). grader_mutants_test grades each and expects the check that
// should catch it to fail with the right words. Test code: never part of a student release.
#include <cstdlib>
#include <string>

#include "dtlab/core/error.h"
#include "dtlab/data/sampler.h"
#include "dtlab/tasks/dp.h"

namespace dtlab::dp {
namespace {

bool mutant(const char* name) {
  const char* m = std::getenv("DTLAB_MUTANT");
  return m && std::string(m) == name;
}

}  // namespace

int64_t Partition::size() const { return static_cast<int64_t>(indices_.size()); }

data::Batch Partition::batch(const std::vector<int64_t>& rows) const {
  std::vector<int64_t> examples;
  for (int64_t row : rows) examples.push_back(indices_.at(static_cast<size_t>(row)));
  return data_->batch(examples);
}

DataPartitioner::DataPartitioner(const train::Dataset& data, const std::vector<double>& sizes, uint64_t seed)
    : data_(&data) {
  const int64_t n = data.size();
  if (mutant("seed_ignored")) seed = 1234;  // the original's default seed, whatever the run's is
  if (mutant("seed_always_42")) seed = 42;  // right for the grader's first run, not for another seed
  const std::vector<int64_t> shuffled = data::shuffled_indices(n, seed);
  size_t start = 0;
  for (double fraction : sizes) {
    const auto length = static_cast<size_t>(fraction * static_cast<double>(n));
    partitions_.emplace_back(shuffled.begin() + start, shuffled.begin() + start + length);
    start += length;
  }
}

Partition DataPartitioner::use(int k) const {
  if (k < 0 || k >= static_cast<int>(partitions_.size())) throw Error("no partition " + std::to_string(k));
  return Partition(*data_, partitions_[static_cast<size_t>(k)]);
}

PartitionLoader partition_dataset(int rank, int world_size, const train::Dataset& dataset, int64_t batch_size,
                                  uint64_t seed) {
  const int64_t per_rank = mutant("whole_batch") ? batch_size : batch_size / world_size;
  if (mutant("whole_dataset")) {  // no partitioning: every rank shuffles the whole set the same way
    return {Partition(dataset, data::shuffled_indices(dataset.size(), seed)), per_rank};
  }
  const std::vector<double> sizes(static_cast<size_t>(world_size), 1.0 / world_size);
  if (mutant("seed_per_rank")) seed += static_cast<uint64_t>(rank);  // each rank draws its own shuffle
  const DataPartitioner partitioner(dataset, sizes, seed);
  if (mutant("overlapping_parts")) return {partitioner.use(rank / 2), per_rank};  // ranks 0, 1 share part 0
  if (mutant("strided_parts")) {  // a valid cut, not the seed's: every world-th example of the shuffle
    const std::vector<int64_t> shuffled = data::shuffled_indices(dataset.size(), seed);
    const auto length = static_cast<size_t>((1.0 / world_size) * static_cast<double>(dataset.size()));
    std::vector<int64_t> mine;
    for (size_t i = 0; i < length; ++i) mine.push_back(shuffled.at(i * static_cast<size_t>(world_size) + static_cast<size_t>(rank)));
    return {Partition(dataset, mine), per_rank};
  }
  Partition mine = partitioner.use(rank);
  if (mutant("uneven_parts") && rank == 0) {  // rank 0 also takes what the cuts left over, and more
    std::vector<int64_t> more = mine.indices();
    for (int64_t i = 0; i < per_rank; ++i) more.push_back(partitioner.use(1).indices().at(static_cast<size_t>(i)));
    mine = Partition(dataset, more);
  }
  return {mine, per_rank};
}

std::unique_ptr<dist::Group> setup(const dist::Settings& settings) { return dist::init_process_group(settings); }

void average_gradients(torch::nn::Module& model, dist::Group& group) {
  for (auto& p : model.parameters()) {
    if (!p.grad().defined()) continue;
    if (mutant("no_gradients")) {  // "resets" the gradients it should average
      p.mutable_grad().zero_();
      continue;
    }
    if (mutant("averaged_too_late")) {
      // As when average_gradients runs after optimizer.step(): the step has used this rank's own
      // gradient, and the average (here: of a copy) is thrown away by zero_grad.
      torch::Tensor copy = p.grad().clone();
      group.all_reduce(copy, dist::ReduceOp::SUM, "gradients");
      continue;
    }
    group.all_reduce(p.mutable_grad(), dist::ReduceOp::SUM, "gradients");
    if (!mutant("sum_not_average")) p.mutable_grad().div_(group.size());
  }
}

}  // namespace dtlab::dp
