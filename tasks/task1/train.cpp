// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
// Task 1: the parts of run_glue.py's fine-tuning that the original assignment leaves to the
// student (handouts/task1.md). The driver calls these functions; dtlab/tasks/task1.h is their
// specification.
#include <torch/nn/utils/clip_grad.h>

#include "dtlab/core/error.h"
#include "dtlab/tasks/task1.h"

namespace dtlab::task1 {

model::BertForSequenceClassification load_model(const std::filesystem::path& model_dir,
                                                const model::BertOverrides& overrides,
                                                model::LoadReport* report) {
  // TODO(task1): load the pre-trained model from model_dir with model::from_pretrained, passing the overrides and the report.
  throw dtlab::NotImplemented("TODO(task1): load the pre-trained model from model_dir with model::from_pretrained, passing the overrides and the report.");
}

float train_step(glue::BertTrainState& state, const data::Batch& batch) {
  state.model->train();
  const model::ClassifierOutput out = state.model->forward(
      batch.input_ids, batch.attention_mask, batch.token_type_ids, batch.labels);

  // TODO(task1): perform the backward pass: compute the gradient of the loss with respect to every parameter.
  throw dtlab::NotImplemented("TODO(task1): perform the backward pass: compute the gradient of the loss with respect to every parameter.");

  if (state.max_grad_norm > 0) {
    torch::nn::utils::clip_grad_norm_(state.model->parameters(), state.max_grad_norm);
  }

  // TODO(task1): perform a single optimisation step (parameter update) with state.optimizer.
  throw dtlab::NotImplemented("TODO(task1): perform a single optimisation step (parameter update) with state.optimizer.");

  state.scheduler->step();
  state.model->zero_grad();
  return out.loss.item<float>();
}

train::EvalResult after_epoch(glue::BertTrainState& state, int epoch) {
  // TODO(task1): evaluate the model on the dev set after every epoch with state.evaluate() and return the result.
  throw dtlab::NotImplemented("TODO(task1): evaluate the model on the dev set after every epoch with state.evaluate() and return the result.");
}

}  // namespace dtlab::task1
