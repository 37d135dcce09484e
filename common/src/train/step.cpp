// The data-parallel training step, see train/step.h.
#include "dtlab/train/step.h"

#include <torch/nn/utils/clip_grad.h>

namespace dtlab::train {

float data_parallel_step(TrainState& state, const data::Batch& b, const std::function<void()>& sync) {
  state.model->train();
  const model::ClassifierOutput out =
      state.model->forward(b.input_ids, b.attention_mask, b.token_type_ids, b.labels);
  out.loss.backward();  // with DDP, the buckets are reduced during this call
  if (sync) sync();
  if (state.max_grad_norm > 0) {
    torch::nn::utils::clip_grad_norm_(state.model->parameters(), state.max_grad_norm);
  }
  state.optimizer->step();
  state.scheduler->step();
  state.model->zero_grad();
  return out.loss.item<float>();
}

}  // namespace dtlab::train
