// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
// Task 3: data parallelism with DistributedDataParallel, which overlaps the gradient
// all_reduces with the backward pass. dtlab/tasks/task3.h is the specification;
// handouts/task3.md the explanation.
#include "dtlab/core/error.h"
#include "dtlab/tasks/task3.h"

namespace dtlab::task3 {

std::unique_ptr<dist::Group> setup(const dist::Settings& settings) {
  // TODO(task3): set up the process group: join the run described by settings with dist::init_process_group.
  throw dtlab::NotImplemented("TODO(task3): set up the process group: join the run described by settings with dist::init_process_group.");
}

data::SamplerOptions make_sampler(int64_t dataset_size, const dist::Group& group, uint64_t seed) {
  // TODO(task3): return the DistributedSampler options of this rank: dataset_size, the group's size and rank, shuffle on, seed.
  throw dtlab::NotImplemented("TODO(task3): return the DistributedSampler options of this rank: dataset_size, the group's size and rank, shuffle on, seed.");
}

std::unique_ptr<dist::DistributedDataParallel> wrap_model(std::shared_ptr<torch::nn::Module> model,
                                                          dist::Group& group,
                                                          const dist::DdpOptions& options) {
  // TODO(task3): wrap the model in dist::DistributedDataParallel over the group with the options.
  throw dtlab::NotImplemented("TODO(task3): wrap the model in dist::DistributedDataParallel over the group with the options.");
}

}  // namespace dtlab::task3
