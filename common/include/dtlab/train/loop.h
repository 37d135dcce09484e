// The training loop of every driver, for any model: epochs of this rank's shard in minibatches,
// one step each, the loss of the global batch, progress, an evaluation after every epoch, and
// results.json. What differs between exercises comes in as values: the data set, the step
// (the kit's, with the exercise's gradient synchronisation, or a student's own), and what
// happens at the end of an epoch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <vector>

#include "dtlab/data/batch.h"
#include "dtlab/data/sampler.h"
#include "dtlab/report/results.h"
#include "dtlab/train/run.h"
#include "dtlab/train/step.h"
#include "dtlab/train/train_state.h"

namespace dtlab::train {

// The examples a run trains on, as the loop needs them.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // The minibatch of these examples, in this order.
  virtual data::Batch batch(const std::vector<int64_t>& rows) const = 0;
};

struct LoopPlan {
  data::SamplerOptions sampler;  // which examples this rank reads, epoch by epoch
  int64_t batch_per_rank = 1;
  int epochs = 1;
  int64_t total_steps = 0;       // the loop stops there, mid-epoch if need be
  bool evaluate = true;          // call after_epoch at the end of every epoch
  int log_first_steps = 5;       // print the loss of each of the first N steps
  double progress_seconds = 10;  // then a progress line at most this often
  // Not empty: rank 0 records LibTorch's profiler over steps 2-4 and writes trace.json and
  // profile.txt here (--profile; report/profile.h). Those steps' times include its cost.
  std::filesystem::path profile_dir;
  // How many ranks read each minibatch: 1, but a pipeline's stage ranks all read their
  // pipeline's (pipeline/stage_ranks.h). The examples and tokens summed over the ranks are divided by it.
  int ranks_per_batch = 1;
};

// Steps per epoch, total steps and epochs from the data set size, the world size, the batch per
// rank and the flags (max_steps > 0 overrides num_epochs), as run_glue counts them: a rank's
// shard is ceil(N / world) examples.
void plan_steps(LoopPlan& plan, int64_t dataset_size, int world, int num_epochs, int64_t max_steps);

using StepFunction = std::function<StepResult(TrainState&, const StepInput&)>;
using AfterEpoch = std::function<EvalResult(TrainState&, int epoch)>;

// The kit's step (train/step.h) with this synchronisation and hook, as a StepFunction.
StepFunction kit_step(GradientSync& sync, AfterSync after_sync = nullptr);

// Runs the plan: records every step and epoch in results (rank 0 saves it to results_path
// after every epoch). A non-finite loss stops the run with an error naming the rank and step:
// on one process at that step; with ranks at the end of its epoch, on every rank with the same
// words (Note [A non-finite loss] in loop.cpp).
void train_loop(Run& run, TrainState& state, const Dataset& data, const LoopPlan& plan,
                const StepFunction& step, const AfterEpoch& after_epoch, report::Results& results,
                const std::filesystem::path& results_path);

// Fills an epoch record's evaluation fields from an evaluation.
void record_evaluation(report::EpochRecord& record, const EvalResult& result);

}  // namespace dtlab::train
