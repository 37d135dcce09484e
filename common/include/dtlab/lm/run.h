// The GPT-2 translation driver: German->English pairs as a language-modelling task (source,
// <eos_de>, target, <eos_en>), the loss on target tokens, and after every epoch the validation
// loss, perplexity and BLEU of greedy translations. A thin layer on the training core
// (train/run.h, train/loop.h), as glue/run.h is for BERT: it reads the data, builds the model,
// the optimiser and the gradient synchronisation, and hands them to the loop.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dtlab/dist/group.h"
#include "dtlab/lm/grid_trainer.h"
#include "dtlab/lm/options.h"
#include "dtlab/lm/pipeline_step.h"
#include "dtlab/pipeline/stage_ranks.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/shard/sharded_trainer.h"
#include "dtlab/train/gradient_sync.h"
#include "dtlab/train/loop.h"
#include "dtlab/train/run.h"
#include "dtlab/train/train_state.h"

namespace dtlab::lm {

// A GPT-2 run's state: the core's TrainState (state.module is the same model) and the typed
// model an exercise's own code may call.
struct LmTrainState : train::TrainState {
  model::Gpt2LMHeadModel model{nullptr};
};

// This rank's share of the training set, as a data-parallel exercise hands it to the loop: the
// examples it reads, in order, every epoch; their indices in the whole data set (the grader's
// rank dump records them); and how many make one step.
struct RankShare {
  std::shared_ptr<const train::Dataset> data;
  std::vector<int64_t> indices;  // indices[i]: the data set index of data's example i
  int64_t batch_size = 1;
};

// What a data-parallel exercise brings: joining the ranks; this rank's share of the whole
// training set (all of it, the group, the global batch, the seed); the gradient averaging,
// called after every backward. The kit itself copies rank 0's weights to every rank.
struct DataParallelParts {
  train::SetupFunction setup;
  std::function<RankShare(const train::Dataset&, const dist::Group&, int64_t, uint64_t)> partition;
  train::SyncFunction average_gradients;
};

// What the pipeline exercise brings: GPT-2 behind the student's Pipe (its layers on `devices`,
// the batch in micro_batches), and the grading aid --probe (LmOptions::probe), which returns the
// exit code.
struct PipelineParts {
  std::function<PipelinedModel(model::Gpt2LMHeadModel, const std::vector<int>& devices, int micro_batches)> prepare;
  std::function<int(const LmOptions&)> probe;
};

// What a sharded exercise (zero) brings: the strategy that moves the gradients to their pieces
// and the pieces back into the model (shard/shard_step.h). The kit joins the ranks, gives each an
// equal share of the data (lm::equal_shares), lays the parameters in one flat buffer and runs
// AdamW on this rank's piece only.
struct ShardedParts {
  shard::MakeShardStrategy make_strategy;                // the strategy of --zero_stage (1, 2, 3)
  std::function<std::string(int stage)> describe;  // its words for results.json
};

// The kit's data-parallel share: the indices 0..N-1 shuffled once with seed, cut into world equal
// consecutive parts (what the cuts leave over is read by no rank), part `rank` read in order,
// global_batch / world examples a step. dp's reference partition gives the same.
RankShare equal_shares(const train::Dataset& all, const dist::Group& group, int64_t global_batch, uint64_t seed);

struct LmExercise {
  std::string name = "gpt2";                       // printed and in results.json
  std::optional<DataParallelParts> data_parallel;  // set: the run has ranks (and launch flags)
  std::optional<PipelineParts> pipeline;           // set: --stages, --micro_batches, --balance, --probe
  // set: the stages are ranks (pp): launch flags, --stages, --micro_batches, --balance, --schedule
  std::optional<pipeline::StageRankParts> stage_ranks;
  // set: sharded data parallel (zero); data_parallel is set too (the kit's setup and shares)
  std::optional<ShardedParts> sharded;
  // set: the model split over a tensor x data grid (tp): launch flags, --tp
  std::optional<GridParts> tensor_parallel;
  // set: the sequence split over a context x data grid (cp): launch flags, --cp, --cp_block, --cp_layout
  std::optional<GridParts> context_parallel;
  // set: data x pipeline x tensor on one device mesh (mesh): launch flags, --stages, --tp,
  // --micro_batches, --balance, --schedule, --mesh_order
  std::optional<GridParts> mesh;
  // set: data parallel with the kit's step of the precision exercise (precision/precision_trainer.h):
  // launch flags, --recompute_every, --precision, --micro_batches, --loss_scale, ...
  std::optional<GridParts> precision;
  // set: a grading aid (--probe NAME) that runs instead of training and returns the exit code
  std::function<int(const LmOptions&)> probe;
};

// Trains and evaluates: tokenizer, data and model from the flags, AdamW with a linear schedule,
// the kit's step on every minibatch, an evaluation after every epoch (rank 0 prints a few
// translations); writes OUTPUT_DIR/results.json and, unless --no_save, the trained model with
// its tokenizer files. Returns the exit code.
int run_lm(const LmOptions& options, const LmExercise& exercise);

// main(): parses argv with CLI11 and runs; every error becomes a one-line message and an exit
// code (core/main.h).
int lm_main(int argc, char** argv, const LmExercise& exercise);

}  // namespace dtlab::lm
