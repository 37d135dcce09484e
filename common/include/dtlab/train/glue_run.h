// The fine-tuning driver shared by the GLUE exercises: flags in, results.json out, with the
// exercise's own functions called at the points the handout names.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "dtlab/train/glue_options.h"
#include "dtlab/train/train_state.h"

namespace dtlab::train {

// The functions an exercise provides (see tasks/task1.h for their contracts).
struct GlueExercise {
  std::string name;  // "task1", printed and written to results.json
  std::function<model::BertForSequenceClassification(const std::filesystem::path&,
                                                     const model::BertOverrides&,
                                                     model::LoadReport*)>
      load_model;
  std::function<float(TrainState&, const data::Batch&)> train_step;
  std::function<EvalResult(TrainState&, int)> after_epoch;
};

// Runs run_glue.py's fine-tuning: tokenizer and data from the flags, the exercise's model,
// AdamW with a linear schedule, the exercise's step on every minibatch, its after_epoch at the
// end of every epoch; prints the first losses, progress and every evaluation; writes
// OUTPUT_DIR/results.json (and the fine-tuned model unless --no_save). Returns the exit code.
int run_glue(const GlueOptions& options, const GlueExercise& exercise);

// run_glue's main: parses argv with CLI11 and runs; every error becomes a one-line message
// and an exit code (core/main.h).
int glue_main(int argc, char** argv, const GlueExercise& exercise);

}  // namespace dtlab::train
