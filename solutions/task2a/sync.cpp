// Task 2a: data parallelism by hand, with gradients averaged through rank 0 (gather, average,
// scatter). dtlab/tasks/task2a.h is the specification; handouts/task2a.md the explanation.
#include "dtlab/core/error.h"
#include "dtlab/tasks/task2a.h"

namespace dtlab::task2a {

std::unique_ptr<dist::Group> setup(const dist::Settings& settings) {
  // BEGIN TODO(task2a): set up the process group: join the run described by settings with dist::init_process_group.
  return dist::init_process_group(settings);
  // END TODO
}

void broadcast_parameters(torch::nn::Module& model, dist::Group& group) {
  // BEGIN TODO(task2a): copy rank 0's parameters and buffers to every rank: broadcast each from rank 0 (under torch::NoGradGuard, the copy is not part of training).
  torch::NoGradGuard no_grad;
  for (auto& p : model.parameters()) group.broadcast(p, /*src=*/0, "initial parameters");
  for (auto& b : model.buffers()) group.broadcast(b, /*src=*/0, "initial buffers");
  // END TODO
}

data::SamplerOptions make_sampler(int64_t dataset_size, const dist::Group& group, uint64_t seed) {
  // BEGIN TODO(task2a): return the DistributedSampler options of this rank: dataset_size, the group's size and rank, shuffle on, seed.
  return {dataset_size, group.size(), group.rank(), /*shuffle=*/true, seed};
  // END TODO
}

void sync_gradients(torch::nn::Module& model, dist::Group& group) {
  // BEGIN TODO(task2a): for every parameter with a gradient: gather the gradients to rank 0, average them there, scatter the average back into the gradient.
  constexpr int kRoot = 0;
  const bool root = group.rank() == kRoot;
  for (auto& p : model.parameters()) {
    if (!p.grad().defined()) continue;
    torch::Tensor& grad = p.mutable_grad();
    std::vector<torch::Tensor> gathered;
    group.gather(grad, root ? &gathered : nullptr, kRoot, "gradients");
    std::vector<torch::Tensor> averages;
    if (root) {
      const torch::Tensor average = torch::stack(gathered).sum(0).div_(group.size());
      averages.assign(group.size(), average);
    }
    group.scatter(grad, root ? &averages : nullptr, kRoot, "gradients");
  }
  // END TODO
}

}  // namespace dtlab::task2a
