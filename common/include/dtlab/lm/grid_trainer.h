// A model split over a grid of ranks by code outside the kit's library, as run_lm drives it: the
// tp exercise's trainer (tp/tp_trainer.h), whose model calls the student's operators and so is
// compiled with the exercise's driver, never into the library every program links. run_lm sees it
// through this interface only, as it sees pp's StageRankTrainer through its methods: the grid's
// readers (the data-parallel replicas, whose minibatches differ), the step, the grader's dumps,
// the whole model for evaluation and saving, and the run's summary.
#pragma once

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <string>

#include "dtlab/dist/group.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/train/optimizer.h"
#include "dtlab/train/rank_dump.h"
#include "dtlab/train/step.h"

namespace dtlab::lm {

struct LmOptions;

class GridTrainer {
 public:
  virtual ~GridTrainer() = default;
  // The data-parallel replicas (their minibatches differ), this rank's, and the ranks of one
  // replica (they read the same rows).
  virtual int replicas() const = 0;
  virtual int replica() const = 0;
  virtual int ranks_per_replica() const = 0;
  // This rank's parameters, which the optimiser steps (TrainState::module).
  virtual std::shared_ptr<torch::nn::Module> module() = 0;
  // The optimiser where the trainer shards it (the mesh's ZeRO-1: AdamW on this rank's piece of its
  // parameters); nullptr: run_lm's AdamW over module().
  virtual std::unique_ptr<torch::optim::AdamW> make_optimizer(const train::OptimizerOptions& options) {
    return nullptr;
  }
  virtual train::StepResult step(train::TrainState& state, const train::StepInput& input) = 0;
  // The grader's dumps (train/rank_dump.h) at plan.step: this rank's parameters before it, and its
  // gradients once final, before clipping.
  virtual void dump_at(train::RankDumpPlan plan) = 0;
  // The whole model into the run's GPT-2, on every rank (before evaluation and saving). A
  // collective: every rank calls it at the same point.
  virtual void gather_model() = 0;
  // Gives back what gather_model made, where the trainer keeps no whole model between them.
  virtual void release_model() {}
  // results.json's section of the run (a collective).
  virtual nlohmann::json summary() = 0;
  // The banner's line: the grid and what each rank holds.
  virtual std::string describe() const = 0;
  // The section's name in results.json.
  virtual std::string section() const = 0;
};

// What the tp and cp exercises bring: their trainer, made on every rank of the world from the
// whole model (rank 0's weights, already broadcast) and the flags.
struct GridParts {
  std::function<std::unique_ptr<GridTrainer>(model::Gpt2LMHeadModel whole, dist::Group& world, const LmOptions&)> make;
};

}  // namespace dtlab::lm
