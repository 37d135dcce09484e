// pipeline: GPipe pipeline parallelism for GPT-2 (CMU 11-868 homework 4, problem 2, in C++ on the
// kit's pipeline runtime, common/include/dtlab/pipeline/).
//
// The contract between the kit and the student: tasks/pipeline/ implements the functions this
// header marks "yours", solutions/pipeline/ is the reference. The driver
// (common/drivers/pipeline_main.cpp, lm/run.h) trains GPT-2 with --stages S --micro_batches M:
//
//   layers  = GPT-2 as a sequence: embeddings, block 0 .. block L-1, head (ln_f, lm_head)
//   devices = the device (stage) of each layer, balanced by the kit (pipeline/balance.h)
//   pipe    = prepare_pipeline_parallel(model, devices, M)           // yours
//   every step:
//     logits = pipe->forward(input_ids)       // micro-batches flow forward through the stages
//     loss   = mean over the batch's target tokens, on the logits (the kit's)
//     pipe->backward(d loss / d logits)       // and their gradients flow back, stage by stage
//     clip, AdamW step, schedule step, zero gradients (the kit's)
//
// --stages 1 trains the model as it is (no Pipe); --micro_batches 1 is plain model parallelism
// (the stages take turns); more micro-batches overlap them. handouts/pipeline.md explains each
// TODO.
#pragma once

#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "dtlab/model/gpt2.h"
#include "dtlab/pipeline/gpt2_layout.h"
#include "dtlab/pipeline/schedule.h"
#include "dtlab/pipeline/workers.h"

namespace dtlab::pipeline {

// One layer of a model and the device it lives on. Each device is a worker, a thread of this
// process: on a machine with CUDA the device number is a GPU (cuda:<device>, as in the original,
// the layer's parameters already there); without, the worker computes on the CPU with its share
// of the cores (Note [Devices] in core/device.h). The layer's forward is a function of its input
// alone (GPT-2's blocks need no attention mask: rows are padded on the right).
struct Layer {
  std::string name;  // gpt2_layer_name: "embeddings", "block 3", "head"; named in errors
  StageFunction forward;
  int device = 0;
};

// Consecutive layers on one device: what one worker of the Pipe runs.
struct Partition {
  std::vector<Layer> layers;
  int device = 0;
  // The kit's: every layer in order.
  torch::Tensor forward(const torch::Tensor& x) const;
};

// Yours. Groups the layers into partitions, in order: consecutive layers on the same device form
// one partition (the original's _split_module). A layout that returns to an earlier device
// (0, 0, 1, 1, 0) makes a new partition there: three partitions, on devices 0, 1 and 0.
std::vector<Partition> split_module(const std::vector<Layer>& layers);

// Yours. GPipe's fill-drain schedule for num_batches micro-batches over num_partitions
// partitions: one list per clock tick; tick k holds every (micro-batch i, partition j) with
// i + j = k, in order of j, so num_batches + num_partitions - 1 ticks in all (the original's
// _clock_cycles).
Schedule clock_cycles(int num_batches, int num_partitions);

// A GPipe pipeline over partitions, one worker thread per partition (pipeline/workers.h).
class Pipe {
 public:
  // The kit's: starts the workers. micro_batches >= 1.
  Pipe(std::vector<Partition> partitions, int micro_batches, StageWorkersOptions options = {});

  // Yours. input [batch, ...]: splits it into micro-batches (torch::chunk along dim 0: fewer
  // than micro_batches when the batch is smaller), runs them through the partitions on the
  // clock_cycles schedule (compute) and returns the last partition's outputs concatenated in
  // micro-batch order: what the unsplit model returns for the whole batch. With grad mode on,
  // the workers keep what backward needs.
  torch::Tensor forward(const torch::Tensor& input);

  // Yours. grad_output: the gradient of the loss with respect to forward's result. Splits it as
  // forward split its input and runs the backward tasks on the reversed schedule (GPipe: all
  // forwards, then all backwards, last micro-batch of the last partition first), so that every
  // parameter's .grad ends as one backward of the whole batch would leave it.
  void backward(const torch::Tensor& grad_output);

  int micro_batches() const { return micro_batches_; }
  int num_partitions() const { return static_cast<int>(partitions_.size()); }
  const std::vector<Partition>& partitions() const { return partitions_; }
  // Every task of the last forward and backward: when each partition ran which micro-batch.
  const Timeline& timeline() const { return workers_.timeline(); }
  int64_t peak_activation_bytes(int partition) const { return workers_.timeline().peak_bytes(partition); }

 private:
  // Yours. The task-queue protocol: for every tick of the schedule, submit each of its tasks to
  // its partition's worker (workers_.submit: forward takes batches[i] as partition j's input,
  // backward the gradient of partition j's output), then collect each result
  // (workers_.collect(j), which rethrows a partition's error) into batches[i]. The tasks of one
  // tick run at the same time, on their own workers.
  void compute(std::vector<torch::Tensor>& batches, const Schedule& schedule, Pass pass);

  std::vector<Partition> partitions_;
  int micro_batches_;
  StageWorkers workers_;
};

// Yours. GPT-2 as a Pipe: its layers (model->num_stages() of them, Note [Stages] in
// model/gpt2.h: the embeddings, every block, the head), layer s named gpt2_layer_name(s,
// model->num_stages()), on devices[s] and computing model->forward_stage(s, x), split into
// partitions, in a Pipe of micro_batches micro-batches (the original's
// _prepare_pipeline_parallel). The model must outlive the Pipe.
std::unique_ptr<Pipe> prepare_pipeline_parallel(model::Gpt2LMHeadModel model, const std::vector<int>& devices,
                                                int micro_batches, StageWorkersOptions options = {});

}  // namespace dtlab::pipeline
