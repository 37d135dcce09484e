// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
// Task 2a: data parallelism by hand, with gradients averaged through rank 0 (gather, average,
// scatter). dtlab/tasks/task2a.h is the specification; handouts/task2a.md the explanation.
#include "dtlab/core/error.h"
#include "dtlab/tasks/task2a.h"

namespace dtlab::task2a {

std::unique_ptr<dist::Group> setup(const dist::Settings& settings) {
  // TODO(task2a): set up the process group: join the run described by settings with dist::init_process_group.
  throw dtlab::NotImplemented("TODO(task2a): set up the process group: join the run described by settings with dist::init_process_group.");
}

void broadcast_parameters(torch::nn::Module& model, dist::Group& group) {
  // TODO(task2a): copy rank 0's parameters and buffers to every rank: broadcast each from rank 0 (under torch::NoGradGuard, the copy is not part of training).
  throw dtlab::NotImplemented("TODO(task2a): copy rank 0's parameters and buffers to every rank: broadcast each from rank 0 (under torch::NoGradGuard, the copy is not part of training).");
}

data::SamplerOptions make_sampler(int64_t dataset_size, const dist::Group& group, uint64_t seed) {
  // TODO(task2a): return the DistributedSampler options of this rank: dataset_size, the group's size and rank, shuffle on, seed.
  throw dtlab::NotImplemented("TODO(task2a): return the DistributedSampler options of this rank: dataset_size, the group's size and rank, shuffle on, seed.");
}

void sync_gradients(torch::nn::Module& model, dist::Group& group) {
  // TODO(task2a): for every parameter with a gradient: gather the gradients to rank 0, average them there, scatter the average back into the gradient.
  throw dtlab::NotImplemented("TODO(task2a): for every parameter with a gradient: gather the gradients to rank 0, average them there, scatter the average back into the gradient.");
}

}  // namespace dtlab::task2a
