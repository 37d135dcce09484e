// What one training process works on: the model, its optimiser and schedule, and the dev set
// evaluation. The driver builds it; exercise code (tasks/T) reads and steps it.
#pragma once

#include <torch/optim/adamw.h>

#include <functional>
#include <memory>

#include "dtlab/data/glue.h"
#include "dtlab/model/bert.h"
#include "dtlab/train/evaluate.h"
#include "dtlab/train/optimizer.h"

namespace dtlab::train {

struct TrainState {
  model::BertForSequenceClassification model{nullptr};
  std::unique_ptr<torch::optim::AdamW> optimizer;
  std::unique_ptr<LinearWarmupSchedule> scheduler;
  double max_grad_norm = 1.0;  // <= 0 turns clipping off

  // Evaluates the model on the dev set (accuracy and loss) and records the result for this
  // epoch in the run's results. Set by the driver.
  std::function<EvalResult()> evaluate;
};

}  // namespace dtlab::train
