// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
// Task 2b: data parallelism with all_reduce: every rank ends with the sum of all gradients and
// divides it by the world size. dtlab/tasks/task2b.h is the specification; handouts/task2b.md
// the explanation.
#include "dtlab/core/error.h"
#include "dtlab/tasks/task2b.h"

namespace dtlab::task2b {

std::unique_ptr<dist::Group> setup(const dist::Settings& settings) {
  // TODO(task2b): set up the process group: join the run described by settings with dist::init_process_group.
  throw dtlab::NotImplemented("TODO(task2b): set up the process group: join the run described by settings with dist::init_process_group.");
}

void broadcast_parameters(torch::nn::Module& model, dist::Group& group) {
  // TODO(task2b): copy rank 0's parameters and buffers to every rank: broadcast each from rank 0 (under torch::NoGradGuard, the copy is not part of training).
  throw dtlab::NotImplemented("TODO(task2b): copy rank 0's parameters and buffers to every rank: broadcast each from rank 0 (under torch::NoGradGuard, the copy is not part of training).");
}

data::SamplerOptions make_sampler(int64_t dataset_size, const dist::Group& group, uint64_t seed) {
  // TODO(task2b): return the DistributedSampler options of this rank: dataset_size, the group's size and rank, shuffle on, seed.
  throw dtlab::NotImplemented("TODO(task2b): return the DistributedSampler options of this rank: dataset_size, the group's size and rank, shuffle on, seed.");
}

void sync_gradients(torch::nn::Module& model, dist::Group& group) {
  // TODO(task2b): for every parameter with a gradient: all_reduce it with SUM, then divide it by the world size.
  throw dtlab::NotImplemented("TODO(task2b): for every parameter with a gradient: all_reduce it with SUM, then divide it by the world size.");
}

}  // namespace dtlab::task2b
