// The fine-tuning driver shared by the GLUE exercises: flags in, results.json out, with the
// exercise's own functions called at the points the handout names.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "dtlab/data/sampler.h"
#include "dtlab/dist/ddp.h"
#include "dtlab/dist/group.h"
#include "dtlab/train/glue_options.h"
#include "dtlab/train/train_state.h"

namespace dtlab::train {

// The functions an exercise provides (see tasks/T.h for their contracts). kSingle exercises
// (task1) give load_model, train_step and after_epoch; distributed ones give setup and
// make_sampler, and broadcast_parameters and sync_gradients (kDistributed) or wrap_model
// (kDdp); the kit provides the rest. A function left empty is the kit's own: the grader's
// reference run (exercise "reference") is kSingle with all three empty.
struct GlueExercise {
  std::string name;  // "task1", printed and written to results.json
  GlueMode mode = GlueMode::kSingle;
  std::function<model::BertForSequenceClassification(const std::filesystem::path&,
                                                     const model::BertOverrides&,
                                                     model::LoadReport*)>
      load_model;
  std::function<float(TrainState&, const data::Batch&)> train_step;
  std::function<EvalResult(TrainState&, int)> after_epoch;

  std::function<std::unique_ptr<dist::Group>(const dist::Settings&)> setup;
  std::function<data::SamplerOptions(int64_t, const dist::Group&, uint64_t)> make_sampler;
  std::function<void(torch::nn::Module&, dist::Group&)> broadcast_parameters;
  std::function<void(torch::nn::Module&, dist::Group&)> sync_gradients;
  std::function<std::unique_ptr<dist::DistributedDataParallel>(
      std::shared_ptr<torch::nn::Module>, dist::Group&, const dist::DdpOptions&)>
      wrap_model;
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
