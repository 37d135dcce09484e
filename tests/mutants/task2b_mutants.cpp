// Deliberately broken task 2b solutions, one per mistake students make, chosen at run time by
// DTLAB_MUTANT (unset: correct). grader_mutants_test grades each and expects the check that
// should catch it to fail with the right words, so a check that stops catching its bug fails
// CI. Test code: never part of a student release (it is one line from the solution).
#include <torch/nn/utils/clip_grad.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>

#include "dtlab/tasks/task2b.h"

namespace dtlab::task2b {
namespace {

bool mutant(const char* name) {
  const char* m = std::getenv("DTLAB_MUTANT");
  return m && std::string(m) == name;
}

}  // namespace

std::unique_ptr<dist::Group> setup(const dist::Settings& settings) { return dist::init_process_group(settings); }

void broadcast_parameters(torch::nn::Module& model, dist::Group& group) {
  if (mutant("no_broadcast")) return;
  const int src = mutant("broadcast_from_rank1") ? 1 : 0;
  torch::NoGradGuard no_grad;
  for (auto& p : model.parameters()) group.broadcast(p, src, "initial parameters");
  for (auto& b : model.buffers()) group.broadcast(b, src, "initial buffers");
}

data::SamplerOptions make_sampler(int64_t dataset_size, const dist::Group& group, uint64_t seed) {
  if (mutant("overlapping_shards")) return {dataset_size, group.size(), 0, true, seed};  // everyone is rank 0
  if (mutant("missing_shards")) {  // each rank shuffles its own way: shards miss and overlap
    return {dataset_size, group.size(), group.rank(), true, seed + static_cast<uint64_t>(group.rank())};
  }
  return {dataset_size, group.size(), group.rank(), true, seed};
}

void sync_gradients(torch::nn::Module& model, dist::Group& group) {
  if (mutant("sleep_forever") && group.rank() == 1) std::this_thread::sleep_for(std::chrono::hours(24));
  if (mutant("crash") && group.rank() == 1) std::raise(SIGSEGV);
  if (mutant("only_rank0_syncs") && group.rank() != 0) return;  // the most common data-parallel bug
  // Clipped on each rank before the average, to the norm the grader's equivalence runs use
  // (--max_grad_norm 0.1), as a student passing the run's norm along would.
  if (mutant("clip_before_sync")) torch::nn::utils::clip_grad_norm_(model.parameters(), 0.1);
  const auto parameters = model.parameters();
  // half_synced: the loop stops halfway (an off-by-half bound, or a list of "the encoder's" only).
  const size_t count = mutant("half_synced") ? parameters.size() / 2 : parameters.size();
  const dist::ReduceOp op = mutant("max_not_sum") ? dist::ReduceOp::MAX : dist::ReduceOp::SUM;
  for (size_t i = 0; i < count; ++i) {
    torch::Tensor p = parameters[i];
    if (!p.grad().defined()) continue;
    group.all_reduce(p.mutable_grad(), op, "gradients");
    if (!mutant("sum_not_average")) p.mutable_grad().div_(group.size());
  }
}

}  // namespace dtlab::task2b
