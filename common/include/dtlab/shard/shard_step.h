// The sharded training step (the zero exercise, dtlab/tasks/zero.h): one readable path, as
// train/step.h's, with the gradients and parameters moved by a three-verb strategy the student
// writes (flashlight's two verbs, plus the one a sharded optimiser needs after its update):
//
//   loss = forward(batch)
//   strategy.before_backward();  loss.backward();   // ZeRO-2 and FSDP move buckets during it
//   strategy.after_backward();   // this rank's piece of the averaged gradient: shard_gradients
//   clip by the norm over every rank's piece; AdamW on this rank's piece; schedule step
//   strategy.after_update();     // every replica holds the new weights (ZeRO-1/2)
//   gradients set to none
#pragma once

#include <torch/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "dtlab/dist/group.h"
#include "dtlab/shard/unit_hooks.h"
#include "dtlab/shard/units.h"
#include "dtlab/train/loop.h"

namespace dtlab::shard {

class ShardStrategy {
 public:
  virtual ~ShardStrategy() = default;
  virtual void before_backward() {}
  // After backward: this rank's piece of the gradient averaged over ranks is in shard_gradients.
  virtual void after_backward() = 0;
  // After the optimiser has updated this rank's pieces (each unit's shard_values): ZeRO-1 and 2
  // all-gather them, so every rank's model holds every piece's new values; FSDP keeps pieces.
  virtual void after_update() = 0;
  // Around each stage of the model's forward (Note [Stage hooks], model/gpt2.h), training and
  // evaluation alike: FSDP gathers the stage's units before and frees them after.
  virtual void before_stage(int64_t stage) {}
  virtual void after_stage(int64_t stage, const torch::Tensor& output) {}
};

// What the kit hands a strategy: the model's units (Note [Shard units]: this rank's model is a view
// of their flat buffers; the optimiser reads this rank's piece of each unit's gradient from its
// shard_gradients) and the group.
struct ShardContext {
  std::vector<ShardUnit>* units = nullptr;
  dist::Group* group = nullptr;
  // stage_units[s]: the units stage s of the model's forward reads, in order (GPT-2: the
  // embeddings at stage 0, block i at stage i + 1, the head and, tied, the embeddings last).
  std::vector<std::vector<size_t>> stage_units;
  // Note [The replicated baseline] (shard/sharded_trainer.h): every rank's one piece of a unit is the whole
  // unit, so the clip and the dump read this rank's pieces alone, with no sum across ranks.
  bool replicated = false;
};

// Every unit whole on every rank, gathered from each unit's shard_values with c10d's all_gather
// (the kit's, not the student's ring): an FSDP model before its checkpoint is saved, which then
// equals one process's. The units stay allocated.
void gather_units(std::vector<ShardUnit>& units, dist::Group& group);

// Every parameter's averaged gradient, assembled whole on every rank from each unit's
// shard_gradients with c10d's all_gather (the kit's), by the parameter's name: what one process's
// gradient of the global batch is, for the grader's dump of a sharded step. A collective.
// replicated (ShardContext::replicated): the pieces are whole already, nothing is gathered.
std::map<std::string, torch::Tensor> whole_gradients(const std::vector<ShardUnit>& units, dist::Group& group,
                                                     bool replicated = false);

// LibTorch's clip_grad_norm_ over the whole model's gradient, from the pieces: each rank's squared
// norm all-reduced, so every rank scales its piece by the same coefficient. The same numbers as one
// process's clip up to the order of the sums (a few units in the last place). replicated: every
// rank's pieces are the whole gradient, whose norm needs no all-reduce.
void clip_shard_gradients(std::vector<ShardUnit>& units, double max_norm, dist::Group& group, bool replicated = false);

// The step above; state.optimizer must be the pieces' (make_shard_adamw of context's units).
// meter (optional): the kit's measure of the gradient bytes this rank holds, armed before each
// backward and sampled after after_backward. after_reduce (optional): called once after_backward
// has filled the pieces, before clipping (the grader's dump of the step's gradient).
using AfterReduce = std::function<void(const train::StepInput&)>;
train::StepFunction sharded_step(ShardStrategy& strategy, const ShardContext& context,
                                 UnitGradientHooks* meter = nullptr, AfterReduce after_reduce = nullptr);

}  // namespace dtlab::shard
