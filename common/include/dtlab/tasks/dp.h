// dp: data-parallel training of GPT-2 on German->English translation (CMU 11-868 homework 4,
// problem 1, in C++ over the kit's process group).
//
// The contract between the kit and the student: tasks/dp/ implements what this header declares,
// solutions/dp/ is the reference. The driver (common/drivers/dp_main.cpp, lm/run.h) runs, on
// every rank:
//
//   group = setup(settings);                              // once
//   data  = every training pair, tokenised                // the whole data set, on every rank
//   model = GPT-2 (--model_config or --model_name_or_path); the kit copies rank 0's weights
//   mine  = partition_dataset(rank, world, data, global_batch, seed);
//   every epoch, the examples of mine.partition in order, mine.batch_size at a time:
//       forward, loss, backward                           // loss: see "the loss" below
//       average_gradients(*model, *group);                // gradients now equal on every rank
//       clip, AdamW step, schedule step, zero gradients
//
// The loss: each rank's loss is its share of the mean over the target tokens of the whole
// global batch (lm/loss.h, Note [Data-parallel loss]), so that averaging the ranks' gradients
// gives exactly the gradient one process computes on the union of their minibatches.
// handouts/dp.md explains each TODO.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "dtlab/data/batch.h"
#include "dtlab/dist/group.h"
#include "dtlab/dist/settings.h"
#include "dtlab/train/loop.h"

namespace dtlab::dp {

// A view of a data set through a list of its indices: example i of the partition is example
// indices[i] of the data set. The data set must outlive the partition.
class Partition final : public train::Dataset {
 public:
  Partition(const train::Dataset& data, std::vector<int64_t> indices)
      : data_(&data), indices_(std::move(indices)) {}
  // How many examples the partition holds.
  int64_t size() const override;
  // The minibatch of the partition's examples `rows` (positions in the partition), in order.
  data::Batch batch(const std::vector<int64_t>& rows) const override;
  const std::vector<int64_t>& indices() const { return indices_; }

 private:
  // [[maybe_unused]]: read only by the methods a student writes, so a compiler that sees the
  // untouched skeleton's TODOs would warn of a field nobody reads.
  [[maybe_unused]] const train::Dataset* data_;
  std::vector<int64_t> indices_;
};

// Cuts a data set into partitions: the indices 0..N-1 shuffled once with `seed`
// (data::shuffled_indices), then cut into consecutive pieces of int(sizes[k] * N) indices
// (sizes are fractions, e.g. {0.7, 0.2, 0.1}; what the cuts leave over belongs to no part).
// Every rank that builds it with the same seed gets the same partitions.
class DataPartitioner {
 public:
  DataPartitioner(const train::Dataset& data, const std::vector<double>& sizes, uint64_t seed = 1234);
  // Partition k (0 <= k < number of sizes); a dtlab::Error for any other k.
  Partition use(int k) const;

 private:
  [[maybe_unused]] const train::Dataset* data_;  // as in Partition
  std::vector<std::vector<int64_t>> partitions_;
};

// What the original's DataLoader over a partition is: the examples this rank reads, in order,
// and how many of them make one step.
struct PartitionLoader {
  Partition partition;
  int64_t batch_size = 1;
};

// This rank's share of the data set: world_size equal parts (fractions 1 / world_size) drawn
// with seed, part `rank` for this rank, and batch_size / world_size examples per step, so that
// the ranks' minibatches together make a global batch of batch_size.
PartitionLoader partition_dataset(int rank, int world_size, const train::Dataset& dataset,
                                  int64_t batch_size, uint64_t seed);

// Joins the run described by settings (rank, world size, master, backend, timeout) and returns
// its process group: dist::init_process_group does the rendezvous.
std::unique_ptr<dist::Group> setup(const dist::Settings& settings);

// Called after backward on every rank: replaces every parameter's gradient with the average of
// that gradient over all ranks (all_reduce with SUM, then divide by the world size). Parameters
// without a gradient are skipped (on every rank alike).
void average_gradients(torch::nn::Module& model, dist::Group& group);

}  // namespace dtlab::dp
