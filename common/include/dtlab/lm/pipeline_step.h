// GPT-2 trained through a pipeline (the pipeline exercise): the kit's step when the model's
// forward and backward run on the stages of a Pipe, and what the stages' timelines add up to.
// The Pipe itself is the student's (dtlab/tasks/pipeline.h); this sees it as two verbs.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <vector>

#include "dtlab/pipeline/timeline.h"
#include "dtlab/train/loop.h"

namespace dtlab::lm {

// A model behind a pipeline: input ids [batch, seq] -> logits [batch, seq, vocab], and the
// gradient of the loss with respect to those logits back into every parameter's .grad; the
// stages' timeline of the last forward and backward (the Pipe's own, valid while it lives).
struct PipelinedModel {
  std::function<torch::Tensor(const torch::Tensor&)> forward;
  std::function<void(const torch::Tensor&)> backward;
  std::function<const pipeline::Timeline&()> timeline;
};

// Per step: the bubble fraction, each stage's busy seconds, the peak activation bytes; and one
// step's whole timeline (the third, or the last if fewer), for the report's figure.
class PipelineStats {
 public:
  void add(int64_t step, const pipeline::Timeline& timeline);
  // {"steps": n, "mean_bubble_fraction", "mean_busy_seconds": [per stage],
  //  "peak_activation_bytes": [per stage], "timeline_step", "timeline": {...}}
  nlohmann::json summary() const;

 private:
  std::vector<double> bubbles_;
  std::vector<double> busy_sum_;
  std::vector<int64_t> peak_bytes_;
  int64_t timeline_step_ = 0;
  nlohmann::json timeline_;
};

// The step: logits = pipe.forward(input ids); the loss (mean over the batch's target tokens) on
// a detached copy of them, so that its backward stops there; pipe.backward(d loss / d logits);
// then train::apply_update. One process: the pipeline's stages are threads of it.
train::StepFunction pipeline_step(const PipelinedModel& pipe, PipelineStats& stats);

}  // namespace dtlab::lm
