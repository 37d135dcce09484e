// Task 3: data-parallel fine-tuning with the kit's DistributedDataParallel: gradient buckets
// reduced asynchronously while backward runs, instead of one synchronisation after it.
//
// The contract between the kit and the student: tasks/task3/ implements these functions,
// solutions/task3/ is the reference. The driver (common/drivers/task3_main.cpp) runs, on every
// rank:
//
//   group = setup(settings);
//   model = from_pretrained(...)
//   ddp = wrap_model(model, *group, options);        // before the optimiser is built
//   every epoch: indices = shard_indices(make_sampler(N, *group, seed), epoch)
//     every minibatch: forward, loss, backward (DDP synchronises), clip, step, zero gradients
//
// handouts/task3.md explains each TODO.
#pragma once

#include <torch/nn/module.h>

#include <memory>

#include "dtlab/data/sampler.h"
#include "dtlab/dist/ddp.h"
#include "dtlab/dist/group.h"
#include "dtlab/dist/settings.h"

namespace dtlab::task3 {

// As in task 2a: joins the run and returns its process group.
std::unique_ptr<dist::Group> setup(const dist::Settings& settings);

// As in task 2a: the DistributedSampler options of this rank.
data::SamplerOptions make_sampler(int64_t dataset_size, const dist::Group& group, uint64_t seed);

// Wraps model in dist::DistributedDataParallel over group with options (bucket cap from
// --bucket_cap_mb). The wrapper must stay alive for the whole run: the driver keeps it.
std::unique_ptr<dist::DistributedDataParallel> wrap_model(std::shared_ptr<torch::nn::Module> model,
                                                          dist::Group& group,
                                                          const dist::DdpOptions& options);

}  // namespace dtlab::task3
