// Task 2b: data parallelism with all_reduce: every rank ends with the sum of all gradients and
// divides it by the world size. dtlab/tasks/task2b.h is the specification; handouts/task2b.md
// the explanation.
#include "dtlab/core/error.h"
#include "dtlab/tasks/task2b.h"

namespace dtlab::task2b {

std::unique_ptr<dist::Group> setup(const dist::Settings& settings) {
  // BEGIN TODO(task2b): set up the process group: join the run described by settings with dist::init_process_group.
  return dist::init_process_group(settings);
  // END TODO
}

void broadcast_parameters(torch::nn::Module& model, dist::Group& group) {
  // BEGIN TODO(task2b): copy rank 0's parameters and buffers to every rank: broadcast each from rank 0 (under torch::NoGradGuard, the copy is not part of training).
  torch::NoGradGuard no_grad;
  for (auto& p : model.parameters()) group.broadcast(p, /*src=*/0, "initial parameters");
  for (auto& b : model.buffers()) group.broadcast(b, /*src=*/0, "initial buffers");
  // END TODO
}

data::SamplerOptions make_sampler(int64_t dataset_size, const dist::Group& group, uint64_t seed) {
  // BEGIN TODO(task2b): return the DistributedSampler options of this rank: dataset_size, the group's size and rank, shuffle on, seed.
  return {dataset_size, group.size(), group.rank(), /*shuffle=*/true, seed};
  // END TODO
}

void sync_gradients(torch::nn::Module& model, dist::Group& group) {
  // BEGIN TODO(task2b): for every parameter with a gradient: all_reduce it with SUM, then divide it by the world size.
  for (auto& p : model.parameters()) {
    if (!p.grad().defined()) continue;
    group.all_reduce(p.mutable_grad(), dist::ReduceOp::SUM, "gradients");
    p.mutable_grad().div_(group.size());
  }
  // END TODO
}

}  // namespace dtlab::task2b
