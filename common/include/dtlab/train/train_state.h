// What one training process works on, for any model: the module, the loss of a minibatch, the
// optimiser and its schedule, and the evaluation of a held-out set. A driver builds it; the
// kit's step and the exercises' code read and step it.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "dtlab/data/batch.h"
#include "dtlab/train/optimizer.h"

namespace dtlab::train {

// One evaluation of a held-out set.
struct EvalResult {
  std::optional<double> accuracy;          // classification (GLUE)
  double loss = 0;                         // mean loss: per example (GLUE), per target token (LM)
  int64_t examples = 0;
  std::map<std::string, double> metrics;   // others by name: "perplexity", "bleu", ...
};

struct TrainState {
  std::shared_ptr<torch::nn::Module> module;  // the model being trained
  // Forward pass and loss of one minibatch, in the module's current mode (the step sets train
  // mode). Set by the driver, which knows the model's inputs.
  std::function<torch::Tensor(const data::Batch&)> loss;
  std::unique_ptr<torch::optim::AdamW> optimizer;
  std::unique_ptr<LinearWarmupSchedule> scheduler;
  double max_grad_norm = 1.0;  // <= 0 turns clipping off
  // The most bytes of gradients the module's parameters held at an update (apply_update measures
  // them before the clip); -1 where no step went through apply_update (a sharded step's own).
  int64_t gradient_bytes = -1;

  // Evaluates the model on the held-out set. Set by the driver.
  std::function<EvalResult()> evaluate;

  // Note [A non-finite loss] (train/loop.cpp): where step 1's forward read parameters that are
  // not the module's weights at rest (FSDP's gathered units), what it found wrong in them, or ""
  // when nothing. Unset: the forward reads the weights themselves.
  std::function<std::string()> forward_reading;
};

}  // namespace dtlab::train
