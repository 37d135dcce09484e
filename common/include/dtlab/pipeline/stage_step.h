// One training step of one stage rank, as the pp exercise's run_stage drives it: the stage's
// layers, what its forwards stored for their backwards, the shapes that cross each boundary, the
// ranks of its neighbours, and a record of what ran when. Students write the schedule (which
// action when, pipeline/stage_schedule.h) and the protocol (what is received and sent around
// each action, dtlab/tasks/pp.h); this is the kit's part between them: the compute.
//
// Note [Shapes known ahead]: every rank of a pipeline reads the same minibatch (the driver gives
// each the same rows), so every stage knows, before anything arrives, the rows and length of
// every micro-batch and so the shape of each activation and gradient it will receive. Only the
// tensor crosses the wire: no header, no second message for the shape.
//
// Note [Stored activations]: forward(i) keeps micro-batch i's input (a leaf that requires grad)
// and output (with its graph) until backward(i) frees them. Their count at once is what the
// schedule decides: GPipe holds all m before its first backward, 1F1B at most n - stage.
//
// Note [Held, not only stored]: what the process holds is more than what forward stored. The
// tensor forward returns for sending shares its output's memory, and a c10d send keeps its tensor
// alive until its PendingWork is waited for (and destroyed); the gradient backward returns is new
// memory the same way. A protocol that waits for its sends only at the end of the step holds
// every micro-batch's activation on stage 0 whatever the schedule, so 1F1B's bound would be
// reported but not held. The step therefore watches every tensor it returned for sending through
// a weak reference to its storage: held = stored + sent tensors still alive (not counted twice
// while their micro-batch is stored). peak_held() and peak_held_bytes() are measured, at the end
// of every forward and backward, from what is alive then, whoever keeps it alive.
#pragma once

#include <c10/core/Storage.h>
#include <torch/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "dtlab/dist/group.h"
#include "dtlab/pipeline/stage_schedule.h"

namespace dtlab::pipeline {

// Where a stage sits: the group its messages go over, its number, and its neighbours' ranks in
// that group (-1 where there is none).
struct StagePlace {
  dist::Group* group = nullptr;
  int stage = 0, stages = 1;
  int previous_rank = -1, next_rank = -1;
};

// What a stage computes. forward: its layers, input -> output (stage 0's input is the
// micro-batch's input ids). loss, on the last stage only: micro-batch i's share of the batch's
// loss from the stage's output (a scalar whose backward starts the pipeline's).
struct StageCompute {
  std::function<torch::Tensor(const torch::Tensor&)> forward;
  std::function<torch::Tensor(int micro, const torch::Tensor& output)> loss;
  // A grading aid: every forward and backward also sleeps this long, so that whether the ranks
  // overlap shows on their timelines whatever else this machine's cores are doing (a sleep needs
  // no core; the grader's overlap check).
  std::chrono::milliseconds sleep{0};
};

// One action as it ran: seconds on the system clock (the same on every rank of one machine, so
// that stage ranks' timelines line up; between machines only as well as their clocks agree).
struct ActionRecord {
  Action action;
  double start = 0, end = 0;
};

class StageStep {
 public:
  // micro_inputs: on stage 0, micro-batch i's input ids; on the others, one tensor per
  // micro-batch that has the shape and dtype of micro-batch i's activation at this stage's input
  // (Note [Shapes known ahead]). output_shapes: the shape of what this stage outputs for
  // micro-batch i (ignored on the last stage); activations are of dtype `dtype`.
  StageStep(StagePlace place, StageCompute compute, std::vector<torch::Tensor> micro_inputs,
            std::vector<std::vector<int64_t>> output_shapes, torch::ScalarType dtype);

  int stage() const { return place_.stage; }
  int stages() const { return place_.stages; }
  bool is_first() const { return place_.stage == 0; }
  bool is_last() const { return place_.stage == place_.stages - 1; }
  int micro_batches() const { return static_cast<int>(inputs_.size()); }
  // The ranks of the stages before and after this one in group(); -1 on the first (last) stage.
  int previous_rank() const { return place_.previous_rank; }
  int next_rank() const { return place_.next_rank; }
  dist::Group& group() { return *place_.group; }

  // A new tensor to receive micro-batch i's activation into (not on stage 0): the shape and
  // dtype of this stage's input.
  torch::Tensor activation_buffer(int micro) const;
  // A new tensor to receive the gradient of micro-batch i's output into (not on the last stage).
  torch::Tensor gradient_buffer(int micro) const;

  // Forward of micro-batch i through this stage's layers. input: the activation received from
  // the previous stage (undefined on stage 0, which takes its own input ids). Stores what
  // backward(i) needs (Note [Stored activations]). Returns the output to send to the next stage
  // (contiguous, detached from this rank's graph); on the last stage, undefined: the loss of the
  // micro-batch is added to loss().
  torch::Tensor forward(int micro, const torch::Tensor& input = {});
  // Backward of micro-batch i: output_grad is the gradient of its output received from the next
  // stage (undefined on the last stage, which starts from its loss). Adds to the parameters'
  // .grad, frees what forward(i) stored, and returns the gradient of the input to send to the
  // previous stage (undefined on stage 0).
  torch::Tensor backward(int micro, const torch::Tensor& output_grad = {});

  // "activation 3" and "gradient 3": the tags of micro-batch 3's messages in the CommLog and in
  // errors (c10d pairs a send with a recv by order; the tag says what each one carried).
  static std::string activation_tag(int micro);
  static std::string gradient_tag(int micro);

  // After the step: throws dtlab::Error naming the stage and the micro-batches unless every
  // forward and backward ran exactly once (a schedule that skips one would leave gradients short).
  void check_complete() const;
  // The sum of the last stage's micro-batch losses (0 elsewhere).
  double loss() const { return loss_; }
  // The most micro-batches this stage held stored for their backward at once (the schedule's
  // count, Note [Stored activations]).
  int peak_stored() const { return peak_stored_; }
  // The most micro-batches whose boundary tensors this process held at once, stored or in a send
  // not yet waited for, and their bytes (Note [Held, not only stored]).
  int peak_held() const { return peak_held_; }
  int64_t peak_held_bytes() const { return peak_held_bytes_; }
  const std::vector<ActionRecord>& records() const { return records_; }

 private:
  struct Stored {
    torch::Tensor input, output;  // output: the loss on the last stage
    int64_t bytes = 0;
  };
  // A tensor returned for sending, watched without keeping it alive (Note [Held, not only stored]).
  struct Sent {
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
    int micro = 0;
    int64_t bytes = 0;
    bool activation = false;  // the stored output's own memory: counted once while stored
  };
  void check_micro(int micro, const char* what) const;
  std::string where() const;
  void watch_sent(const torch::Tensor& t, int micro, bool activation);
  void measure_held();

  StagePlace place_;
  StageCompute compute_;
  std::vector<torch::Tensor> inputs_;
  std::vector<std::vector<int64_t>> output_shapes_;
  torch::ScalarType dtype_;
  std::map<int, Stored> stored_;
  std::vector<int> forwards_, backwards_;  // per micro-batch: how many times each ran
  double loss_ = 0;
  int peak_stored_ = 0, peak_held_ = 0;
  int64_t stored_bytes_ = 0, peak_held_bytes_ = 0;
  std::vector<Sent> sent_;
  std::vector<ActionRecord> records_;
};

// Seconds on the system clock: the time base of ActionRecord.
double wall_seconds();

}  // namespace dtlab::pipeline
