// Task 2a: data-parallel fine-tuning with gradients synchronised by gather and scatter.
//
// The contract between the kit and the student: tasks/task2a/ implements these functions,
// solutions/task2a/ is the reference. The driver (common/drivers/task2a_main.cpp) runs, on
// every rank:
//
//   group = setup(settings);                         // once
//   model = from_pretrained(...)
//   broadcast_parameters(*model, *group);            // every rank starts from rank 0's weights
//   every epoch: indices = shard_indices(make_sampler(N, *group, seed), epoch)
//     every minibatch of global_batch / world examples:
//       forward, loss, backward
//       sync_gradients(*model, *group);              // gradients now equal on every rank
//       clip, optimizer step, schedule step, zero gradients
//
// handouts/task2a.md explains each TODO.
#pragma once

#include <torch/nn/module.h>

#include <memory>

#include "dtlab/data/sampler.h"
#include "dtlab/dist/group.h"
#include "dtlab/dist/settings.h"

namespace dtlab::task2a {

// Joins the run described by settings (rank, world size, master, backend, timeout) and returns
// its process group: dist::init_process_group does the rendezvous.
std::unique_ptr<dist::Group> setup(const dist::Settings& settings);

// Called once, after the model is loaded and before the optimiser is built: copies rank 0's
// parameters and buffers to every rank (a broadcast from rank 0 per tensor), so that all
// copies of the model start equal even when ranks drew different random weights (the fresh
// classifier of a pretrained checkpoint; try --init_seed_per_rank). Gradients are averaged
// afterwards, never weights, so copies that start different stay different.
void broadcast_parameters(torch::nn::Module& model, dist::Group& group);

// Which examples this rank reads: a DistributedSampler over dataset_size examples for this
// rank of group, shuffled from seed (see data/sampler.h).
data::SamplerOptions make_sampler(int64_t dataset_size, const dist::Group& group, uint64_t seed);

// Called after backward on every rank: replaces every parameter's gradient with the average of
// that gradient over all ranks, by gathering the gradients to rank 0, averaging them there and
// scattering the average back. Parameters without a gradient are skipped (on every rank alike).
void sync_gradients(torch::nn::Module& model, dist::Group& group);

}  // namespace dtlab::task2a
