// Deliberately broken pipeline solutions, one per mistake the original exercise's tests could not
// see, chosen at run time by DTLAB_MUTANT (unset: correct). grader_mutants_test grades each and
// expects the check that should catch it to fail with the right words. Test code: never part of
// a student release.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "dtlab/tasks/pipeline.h"

namespace dtlab::pipeline {
namespace {

bool mutant(const char* name) {
  const char* m = std::getenv("DTLAB_MUTANT");
  return m && std::string(m) == name;
}

}  // namespace

std::vector<Partition> split_module(const std::vector<Layer>& layers) {
  std::vector<Partition> partitions;
  for (const Layer& layer : layers) {
    if (mutant("group_by_device")) {  // every layer of a device in one partition, wherever it is
      auto it = std::find_if(partitions.begin(), partitions.end(), [&](const Partition& p) { return p.device == layer.device; });
      if (it != partitions.end()) {
        it->layers.push_back(layer);
        continue;
      }
    }
    if (partitions.empty() || partitions.back().device != layer.device) {
      partitions.push_back(Partition{{}, layer.device});
    }
    partitions.back().layers.push_back(layer);
  }
  return partitions;
}

Schedule clock_cycles(int num_batches, int num_partitions) {
  Schedule schedule;
  for (int k = 0; k < num_batches + num_partitions - 1; ++k) {
    std::vector<Task> tick;
    for (int j = 0; j < num_partitions; ++j) {
      const int i = mutant("schedule_off_by_one") ? k - j - 1 : k - j;  // starts a tick late, loses the last
      if (i >= 0 && i < num_batches) tick.push_back({i, j});
    }
    schedule.push_back(std::move(tick));
  }
  return schedule;
}

torch::Tensor Pipe::forward(const torch::Tensor& input) {
  // no_clear: the kit's line deleted, so what a failed step left (a result not collected) is
  // taken for this step's.
  if (!mutant("no_clear")) workers_.clear();  // a new step: nothing of the last one is kept
  std::vector<torch::Tensor> batches = input.chunk(micro_batches_, 0);
  compute(batches, clock_cycles(static_cast<int>(batches.size()), num_partitions()), Pass::kForward);
  return torch::cat(batches, 0);
}

void Pipe::backward(const torch::Tensor& grad_output) {
  std::vector<torch::Tensor> grads = grad_output.chunk(micro_batches_, 0);
  if (mutant("unscaled_micro_losses")) {  // each micro-batch's loss its own mean: m times the batch's gradient
    for (torch::Tensor& g : grads) g = g * static_cast<double>(grads.size());
  }
  if (mutant("backward_not_pipelined")) {  // backward one micro-batch after another, stage by stage
    for (int i = static_cast<int>(grads.size()) - 1; i >= 0; --i) {
      for (int j = num_partitions() - 1; j >= 0; --j) {
        workers_.submit({i, j}, Pass::kBackward, grads[static_cast<size_t>(i)]);
        grads[static_cast<size_t>(i)] = workers_.collect(j);
      }
    }
    return;
  }
  compute(grads, reversed(clock_cycles(static_cast<int>(grads.size()), num_partitions())), Pass::kBackward);
}

void Pipe::compute(std::vector<torch::Tensor>& batches, const Schedule& schedule, Pass pass) {
  for (const std::vector<Task>& tick : schedule) {
    if (mutant("sequential_pipe")) {  // each task submitted and collected before the next: no overlap
      for (const Task& task : tick) {
        workers_.submit(task, pass, batches[static_cast<size_t>(task.micro)]);
        batches[static_cast<size_t>(task.micro)] = workers_.collect(task.stage);
      }
      continue;
    }
    for (const Task& task : tick) workers_.submit(task, pass, batches[static_cast<size_t>(task.micro)]);
    for (const Task& task : tick) batches[static_cast<size_t>(task.micro)] = workers_.collect(task.stage);
  }
}

std::unique_ptr<Pipe> prepare_pipeline_parallel(model::Gpt2LMHeadModel model, const std::vector<int>& devices,
                                                int micro_batches, StageWorkersOptions options) {
  std::vector<Layer> layers;
  for (int64_t s = 0; s < model->num_stages(); ++s) {
    if (mutant("dropped_block") && s == 1) continue;  // block 0 left out
    const std::string name = gpt2_layer_name(s, model->num_stages());
    // block_without_grad: block 0's output detached, so backward never reaches block 0 (nor the
    // position embeddings before it); every other gradient is right.
    const bool detached = mutant("block_without_grad") && s == 1;
    // half_precision_hand_off: each activation that moves to another device rounded to fp16 and
    // back (as a wire of half the bytes would carry it; its gradient likewise on the way back): the
    // smallest mistake the transparency check must catch (Note [The Pipe's tolerance] in
    // grader/checks_pipeline.cpp).
    const bool half = mutant("half_precision_hand_off") && s + 1 < model->num_stages() &&
                      devices.at(static_cast<size_t>(s)) != devices.at(static_cast<size_t>(s + 1));
    layers.push_back({name,
                      [model, s, detached, half](const torch::Tensor& x) mutable {
                        const torch::Tensor y = model->forward_stage(s, x);
                        if (half) return y.to(torch::kHalf).to(y.scalar_type());
                        return detached ? y.detach() : y;
                      },
                      devices.at(static_cast<size_t>(s))});
  }
  return std::make_unique<Pipe>(split_module(layers), micro_batches, std::move(options));
}

}  // namespace dtlab::pipeline
