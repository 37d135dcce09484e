// Task 3: data parallelism with DistributedDataParallel, which overlaps the gradient
// all_reduces with the backward pass. dtlab/tasks/task3.h is the specification;
// handouts/task3.md the explanation.
#include "dtlab/core/error.h"
#include "dtlab/tasks/task3.h"

namespace dtlab::task3 {

std::unique_ptr<dist::Group> setup(const dist::Settings& settings) {
  // BEGIN TODO(task3): set up the process group: join the run described by settings with dist::init_process_group.
  return dist::init_process_group(settings);
  // END TODO
}

data::SamplerOptions make_sampler(int64_t dataset_size, const dist::Group& group, uint64_t seed) {
  // BEGIN TODO(task3): return the DistributedSampler options of this rank: dataset_size, the group's size and rank, shuffle on, seed.
  return {dataset_size, group.size(), group.rank(), /*shuffle=*/true, seed};
  // END TODO
}

std::unique_ptr<dist::DistributedDataParallel> wrap_model(std::shared_ptr<torch::nn::Module> model,
                                                          dist::Group& group,
                                                          const dist::DdpOptions& options) {
  // BEGIN TODO(task3): wrap the model in dist::DistributedDataParallel over the group with the options.
  return std::make_unique<dist::DistributedDataParallel>(model, group, options);
  // END TODO
}

}  // namespace dtlab::task3
