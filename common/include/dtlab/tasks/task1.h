// Task 1: fine-tune a pre-trained BERT on GLUE RTE on one machine.
//
// The contract between the kit and the student: tasks/task1/ implements these three functions,
// solutions/task1/ is the reference. The driver (common/drivers/task1_main.cpp) parses the
// run_glue flags, reads the data, builds the optimiser and calls, in this order:
//
//   state.model = load_model(model_dir, overrides, &report);
//   for every epoch:
//     for every minibatch:  loss = train_step(state, batch);
//     result = after_epoch(state, epoch);
//
// handouts/task1.md explains each TODO.
#pragma once

#include <filesystem>

#include "dtlab/data/glue.h"
#include "dtlab/model/bert.h"
#include "dtlab/glue/run.h"

namespace dtlab::task1 {

// Loads the pre-trained model in `model_dir` (a Hugging Face folder: config.json and
// model.safetensors) as a BertForSequenceClassification, with the command-line overrides
// (dropout, number of labels) applied to its configuration. Fills *report with the weights the
// checkpoint did not have (the fresh classifier) and the ones it had but the model does not use.
model::BertForSequenceClassification load_model(const std::filesystem::path& model_dir,
                                                const model::BertOverrides& overrides,
                                                model::LoadReport* report);

// One optimisation step on one minibatch: forward pass and loss, backward pass, gradient
// clipping to state.max_grad_norm, optimizer step, learning-rate schedule step, gradients reset
// to zero. Returns the minibatch's loss (before the step).
float train_step(glue::BertTrainState& state, const data::Batch& batch);

// Called once at the end of every epoch (epoch counts from 1). Evaluates the model on the dev
// set with state.evaluate() and returns the result, which the driver prints and records.
train::EvalResult after_epoch(glue::BertTrainState& state, int epoch);

}  // namespace dtlab::task1
