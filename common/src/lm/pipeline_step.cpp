// The pipeline's training step and its statistics, see lm/pipeline_step.h.
#include "dtlab/lm/pipeline_step.h"

#include <algorithm>

#include "dtlab/core/error.h"
#include "dtlab/lm/loss.h"
#include "dtlab/train/step.h"

namespace dtlab::lm {

namespace pipeline_stats {
constexpr int64_t kTimelineStep = 3;  // after the first steps' allocations and thread start-up
}

void PipelineStats::add(int64_t step, const pipeline::Timeline& timeline) {
  const auto stages = static_cast<size_t>(timeline.stages());
  busy_sum_.resize(stages, 0.0);
  peak_bytes_.resize(stages, 0);
  bubbles_.push_back(timeline.bubble_fraction());
  for (size_t s = 0; s < stages; ++s) {
    busy_sum_[s] += timeline.busy(static_cast<int>(s));
    peak_bytes_[s] = std::max(peak_bytes_[s], timeline.peak_bytes(static_cast<int>(s)));
  }
  if (step <= pipeline_stats::kTimelineStep) {
    timeline_step_ = step;
    timeline_ = timeline.to_json();
  }
}

nlohmann::json PipelineStats::summary() const {
  const double n = static_cast<double>(std::max<size_t>(bubbles_.size(), 1));
  double bubble = 0;
  for (double b : bubbles_) bubble += b;
  std::vector<double> busy;
  for (double b : busy_sum_) busy.push_back(b / n);
  return {{"steps", bubbles_.size()},          {"mean_bubble_fraction", bubble / n},
          {"mean_busy_seconds", busy},         {"peak_activation_bytes", peak_bytes_},
          {"timeline_step", timeline_step_},   {"timeline", timeline_}};
}

train::StepFunction pipeline_step(const PipelinedModel& pipe, PipelineStats& stats) {
  return [&pipe, &stats](train::TrainState& state, const train::StepInput& input) {
    state.module->train();
    const data::Batch& b = *input.batch;
    const torch::Tensor logits = pipe.forward(b.input_ids);  // micro-batches through the stages
    // The loss's own graph starts at the logits: its backward gives d loss / d logits, which the
    // pipe carries back through the stages.
    const torch::Tensor leaf = logits.detach().requires_grad_(true);
    const torch::Tensor loss =  // on the last stage's device, where the logits come out
        weighted_token_loss(leaf, b.labels.to(leaf.device()), b.label_weights.to(leaf.device()));
    loss.backward();
    pipe.backward(leaf.grad());
    stats.add(input.step, pipe.timeline());
    train::apply_update(state);
    return train::StepResult{loss.item<float>(), 0.0};
  };
}

}  // namespace dtlab::lm
