// pipeline: GPipe pipeline parallelism for GPT-2: the model split into partitions that run on
// their own workers, the batch split into micro-batches that flow through them on a clock-cycle
// schedule, forward and then backward. dtlab/tasks/pipeline.h is the specification;
// handouts/pipeline.md the explanation.
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/tasks/pipeline.h"

namespace dtlab::pipeline {

std::vector<Partition> split_module(const std::vector<Layer>& layers) {
  // BEGIN TODO(pipeline): walk the layers in order; start a new partition whenever a layer's device differs from the previous layer's, so consecutive layers on one device share a partition.
  std::vector<Partition> partitions;
  for (const Layer& layer : layers) {
    if (partitions.empty() || partitions.back().device != layer.device) {
      partitions.push_back(Partition{{}, layer.device});
    }
    partitions.back().layers.push_back(layer);
  }
  return partitions;
  // END TODO
}

Schedule clock_cycles(int num_batches, int num_partitions) {
  // BEGIN TODO(pipeline): one list per clock tick k = 0 .. num_batches + num_partitions - 2, holding every (micro-batch i, partition j) with i + j = k, in order of j.
  Schedule schedule;
  for (int k = 0; k < num_batches + num_partitions - 1; ++k) {
    std::vector<Task> tick;
    for (int j = 0; j < num_partitions; ++j) {
      const int i = k - j;
      if (i >= 0 && i < num_batches) tick.push_back({i, j});
    }
    schedule.push_back(std::move(tick));
  }
  return schedule;
  // END TODO
}

torch::Tensor Pipe::forward(const torch::Tensor& input) {
  workers_.clear();  // a new step: nothing of the last one is kept
  // BEGIN TODO(pipeline): split the input into micro_batches_ chunks (torch::chunk along dim 0), run them through every partition with compute on clock_cycles(number of chunks, partitions), and concatenate the outputs in micro-batch order.
  std::vector<torch::Tensor> batches = input.chunk(micro_batches_, 0);
  compute(batches, clock_cycles(static_cast<int>(batches.size()), num_partitions()), Pass::kForward);
  return torch::cat(batches, 0);
  // END TODO
}

void Pipe::backward(const torch::Tensor& grad_output) {
  // BEGIN TODO(pipeline): split grad_output as forward split its input (the same chunks), and run the backward tasks with compute on the reversed forward schedule.
  std::vector<torch::Tensor> grads = grad_output.chunk(micro_batches_, 0);
  compute(grads, reversed(clock_cycles(static_cast<int>(grads.size()), num_partitions())), Pass::kBackward);
  // END TODO
}

void Pipe::compute(std::vector<torch::Tensor>& batches, const Schedule& schedule, Pass pass) {
  // BEGIN TODO(pipeline): for every tick, first submit each of its tasks (workers_.submit({i, j}, pass, batches[i])), then collect each (batches[i] = workers_.collect(j)): the tasks of a tick run at the same time.
  for (const std::vector<Task>& tick : schedule) {
    for (const Task& task : tick) workers_.submit(task, pass, batches[static_cast<size_t>(task.micro)]);
    for (const Task& task : tick) batches[static_cast<size_t>(task.micro)] = workers_.collect(task.stage);
  }
  // END TODO
}

std::unique_ptr<Pipe> prepare_pipeline_parallel(model::Gpt2LMHeadModel model, const std::vector<int>& devices,
                                                int micro_batches, StageWorkersOptions options) {
  // BEGIN TODO(pipeline): make one Layer per stage s of the model (its forward: model->forward_stage(s, x); its device: devices[s]), split them into partitions and return them in a Pipe of micro_batches micro-batches.
  std::vector<Layer> layers;
  for (int64_t s = 0; s < model->num_stages(); ++s) {
    const std::string name = gpt2_layer_name(s, model->num_stages());
    layers.push_back({name, [model, s](const torch::Tensor& x) mutable { return model->forward_stage(s, x); },
                      devices.at(static_cast<size_t>(s))});
  }
  return std::make_unique<Pipe>(split_module(layers), micro_batches, std::move(options));
  // END TODO
}

}  // namespace dtlab::pipeline
