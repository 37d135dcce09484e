// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
// pipeline: GPipe pipeline parallelism for GPT-2: the model split into partitions that run on
// their own workers, the batch split into micro-batches that flow through them on a clock-cycle
// schedule, forward and then backward. dtlab/tasks/pipeline.h is the specification;
// handouts/pipeline.md the explanation.
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/tasks/pipeline.h"

namespace dtlab::pipeline {

std::vector<Partition> split_module(const std::vector<Layer>& layers) {
  // TODO(pipeline): walk the layers in order; start a new partition whenever a layer's device differs from the previous layer's, so consecutive layers on one device share a partition.
  throw dtlab::NotImplemented("TODO(pipeline): walk the layers in order; start a new partition whenever a layer's device differs from the previous layer's, so consecutive layers on one device share a partition.");
}

Schedule clock_cycles(int num_batches, int num_partitions) {
  // TODO(pipeline): one list per clock tick k = 0 .. num_batches + num_partitions - 2, holding every (micro-batch i, partition j) with i + j = k, in order of j.
  throw dtlab::NotImplemented("TODO(pipeline): one list per clock tick k = 0 .. num_batches + num_partitions - 2, holding every (micro-batch i, partition j) with i + j = k, in order of j.");
}

torch::Tensor Pipe::forward(const torch::Tensor& input) {
  workers_.clear();  // a new step: nothing of the last one is kept
  // TODO(pipeline): split the input into micro_batches_ chunks (torch::chunk along dim 0), run them through every partition with compute on clock_cycles(number of chunks, partitions), and concatenate the outputs in micro-batch order.
  throw dtlab::NotImplemented("TODO(pipeline): split the input into micro_batches_ chunks (torch::chunk along dim 0), run them through every partition with compute on clock_cycles(number of chunks, partitions), and concatenate the outputs in micro-batch order.");
}

void Pipe::backward(const torch::Tensor& grad_output) {
  // TODO(pipeline): split grad_output as forward split its input (the same chunks), and run the backward tasks with compute on the reversed forward schedule.
  throw dtlab::NotImplemented("TODO(pipeline): split grad_output as forward split its input (the same chunks), and run the backward tasks with compute on the reversed forward schedule.");
}

void Pipe::compute(std::vector<torch::Tensor>& batches, const Schedule& schedule, Pass pass) {
  // TODO(pipeline): for every tick, first submit each of its tasks (workers_.submit({i, j}, pass, batches[i])), then collect each (batches[i] = workers_.collect(j)): the tasks of a tick run at the same time.
  throw dtlab::NotImplemented("TODO(pipeline): for every tick, first submit each of its tasks (workers_.submit({i, j}, pass, batches[i])), then collect each (batches[i] = workers_.collect(j)): the tasks of a tick run at the same time.");
}

std::unique_ptr<Pipe> prepare_pipeline_parallel(model::Gpt2LMHeadModel model, const std::vector<int>& devices,
                                                int micro_batches, StageWorkersOptions options) {
  // TODO(pipeline): make one Layer per stage s of the model (its forward: model->forward_stage(s, x); its device: devices[s]), split them into partitions and return them in a Pipe of micro_batches micro-batches.
  throw dtlab::NotImplemented("TODO(pipeline): make one Layer per stage s of the model (its forward: model->forward_stage(s, x); its device: devices[s]), split them into partitions and return them in a Pipe of micro_batches micro-batches.");
}

}  // namespace dtlab::pipeline
