// The GLUE fine-tuning driver (run_glue.py in C++): BERT, the RTE files, accuracy. A thin layer
// on the training core (train/run.h, train/loop.h): it reads the data, builds the model, the
// optimiser and the gradient synchronisation, and hands them to the loop.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "dtlab/data/sampler.h"
#include "dtlab/dist/ddp.h"
#include "dtlab/dist/group.h"
#include "dtlab/glue/options.h"
#include "dtlab/model/bert.h"
#include "dtlab/train/gradient_sync.h"
#include "dtlab/train/run.h"
#include "dtlab/train/train_state.h"

namespace dtlab::glue {

// A BERT run's state: the core's TrainState (state.module is the same model) and the typed
// model that task 1's own step calls.
struct BertTrainState : train::TrainState {
  model::BertForSequenceClassification model{nullptr};
};

// How a data-parallel exercise synchronises gradients, made once the model is loaded. It also
// brings every rank to rank 0's weights (a broadcast, or DDP's own at construction).
using SyncFactory = std::function<std::unique_ptr<train::GradientSync>(
    std::shared_ptr<torch::nn::Module>, dist::Group&, const GlueOptions&)>;

// Task 2a/2b: the exercise's broadcast_parameters once, its sync_gradients after every backward.
SyncFactory sync_by_hand(std::function<void(torch::nn::Module&, dist::Group&)> broadcast_parameters,
                         train::SyncFunction sync_gradients);
// Task 3: the exercise's wrap_model (DistributedDataParallel, bucket cap from --bucket_cap_mb).
SyncFactory sync_by_ddp(std::function<std::unique_ptr<dist::DistributedDataParallel>(
                            std::shared_ptr<torch::nn::Module>, dist::Group&, const dist::DdpOptions&)>
                            wrap_model);

// What a data-parallel exercise brings (tasks/T.h): joining the ranks, this rank's examples,
// and the gradient synchronisation.
struct DataParallelParts {
  train::SetupFunction setup;
  std::function<data::SamplerOptions(int64_t, const dist::Group&, uint64_t)> make_sampler;
  SyncFactory synchronise;
};

// What task 1 brings: its own loading, step and end of epoch. Each one left empty is the kit's
// (the grader's reference run leaves all three empty).
struct OwnParts {
  std::function<model::BertForSequenceClassification(const std::filesystem::path&,
                                                     const model::BertOverrides&,
                                                     model::LoadReport*)>
      load_model;
  std::function<float(BertTrainState&, const data::Batch&)> train_step;
  std::function<train::EvalResult(BertTrainState&, int)> after_epoch;
};

struct GlueExercise {
  std::string name;                                // "task1", printed and in results.json
  GlueMode flags = GlueMode::kSingle;              // which flags the binary takes
  OwnParts own;                                    // one process
  std::optional<DataParallelParts> data_parallel;  // set: the run has ranks
};

// Runs run_glue.py's fine-tuning: tokenizer and data from the flags, the exercise's model,
// AdamW with a linear schedule, a step on every minibatch, an evaluation at the end of every
// epoch; prints the first losses, progress and every evaluation; writes
// OUTPUT_DIR/results.json (and the fine-tuned model unless --no_save). Returns the exit code.
int run_glue(const GlueOptions& options, const GlueExercise& exercise);

// run_glue's main: parses argv with CLI11 and runs; every error becomes a one-line message
// and an exit code (core/main.h).
int glue_main(int argc, char** argv, const GlueExercise& exercise);

}  // namespace dtlab::glue
