// GPT-2 trained sharded (the zero exercise, dtlab/tasks/zero.h), as pipeline/stage_ranks.h's StageRankTrainer
// is for stages as ranks: the model cut into units (Note [Shard units]: embeddings, each block,
// head), AdamW on this rank's pieces, the student's strategy wired to the sharded step and, for
// FSDP, to the model's stage hooks (Note [Stage hooks]), and the kit's measures of what a rank
// holds. run_lm makes one when LmExercise::sharded is set; tests make one on thread ranks.
#pragma once

#include <nlohmann/json.hpp>
#include <torch/optim/adamw.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dtlab/dist/group.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/shard/shard_step.h"
#include "dtlab/shard/unit_hooks.h"
#include "dtlab/shard/units.h"
#include "dtlab/train/loop.h"
#include "dtlab/train/optimizer.h"
#include "dtlab/train/rank_dump.h"

namespace dtlab::shard {

// GPT-2's units: "embeddings" (wte, wpe), each block "transformer.h.<i>", "head" (ln_f, and
// lm_head when untied), in forward order.
std::string gpt2_unit_of(const std::string& parameter);
// Which of those units each stage of GPT-2's forward reads (shard::ShardContext::stage_units).
std::vector<std::vector<size_t>> gpt2_stage_units(const model::Gpt2LMHeadModel& model,
                                                  const std::vector<shard::ShardUnit>& units);

// Note [The replicated baseline]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// --zero_stage 0 is what sharding is measured against: every rank keeps the whole model, its
// whole averaged gradient and the whole of AdamW's state, as DDP's ranks do, in the same step,
// the same units and under the same meter as stages 1-3. It is ZeRO-1 with one piece per unit
// (make_units for a world of 1: this rank's piece is the whole unit), its gradient averaged with
// c10d's all_reduce (the kit's, not the student's ring), unit by unit after backward, and its
// clip reading the whole gradient with no sum across ranks (ShardContext::replicated). So its
// bars differ from ZeRO-1's by exactly what ZeRO-1 shards (AdamW's moments and the averaged
// gradient divided by the ranks), and the memory model's ZeRO-1 at one rank is its mark. The kit
// writes it; the student's strategies are stages 1-3.
inline constexpr const char* kReplicatedStrategy =
    "replicated (the kit's baseline): every rank holds the whole model, gradient and AdamW state; c10d's "
    "all_reduce averages the gradient";

// The strategy of a ZeRO stage (1, 2 or 3) for a context: the exercise's (zero_main.cpp).
using MakeShardStrategy = std::function<std::unique_ptr<shard::ShardStrategy>(int stage, const shard::ShardContext&)>;

class ShardedTrainer {
 public:
  // stage: 0 (Note [The replicated baseline], the kit's; `make` is not called), 1, 2 or 3.
  // Note [Reading only what a rank keeps]: every rank built the model alike (the same seed, the
  // same checkpoint read whole), and a few bytes prove it (check_same_start, instead of a
  // broadcast of the model). Stage 3 keeps only this rank's pieces; with `pieces_from` (the model
  // was built with lm::Weights::kLater) it then reads its pieces, and nothing else, from the
  // checkpoint's files.
  ShardedTrainer(model::Gpt2LMHeadModel model, dist::Group& group, int stage, const MakeShardStrategy& make,
                 const std::filesystem::path& pieces_from = {});
  ~ShardedTrainer();
  ShardedTrainer(const ShardedTrainer&) = delete;
  ShardedTrainer& operator=(const ShardedTrainer&) = delete;

  // AdamW over this rank's pieces (shard/shard_optimizer.h).
  std::unique_ptr<torch::optim::AdamW> make_optimizer(const train::OptimizerOptions& options);
  // dump (optional): the grader's files at dump->step (train/rank_dump.h): before the step what
  // this rank reads and the parameters it holds whole (none at rest under FSDP), after the
  // strategy's after_backward every parameter's averaged gradient assembled from the pieces
  // (shard::whole_gradients: a collective, so every rank dumps).
  train::StepFunction step(std::optional<train::RankDumpPlan> dump = std::nullopt);

  // FSDP: the whole model on every rank, for evaluation and saving (PyTorch's summon_full_params:
  // ranks decode different numbers of tokens, so gathers inside the forward would not pair up),
  // and back to pieces. A collective: every rank calls it. Nothing to do at stages 1 and 2.
  void gather_whole();
  void release_whole();

  // results.json's "sharding": the stage, parameters, padding, this rank's elements, each unit's
  // padded bytes, the optimiser's state bytes, the most gradient and parameter bytes held at once,
  // the bytes this rank sent per step against the ring's prediction (Note [Bytes of a sharded
  // step]) and, at stages 1 and 2, each rank's checksum of its replica. A collective (the
  // checksums): every rank calls it.
  nlohmann::json summary(const torch::optim::Optimizer& optimizer, const std::string& strategy);

  // Note [A gather that puts pieces in the wrong place]: FSDP only; what step 1's forward found
  // wrong in the units the student's before_stage gathered ("" when each slot held its owner's
  // piece). TrainState::forward_reading reads it.
  const std::string& gather_finding() const { return gather_finding_; }

 private:
  void check_gathered(int64_t stage);

  model::Gpt2LMHeadModel model_;
  dist::Group& group_;
  int stage_;
  int piece_ = 0;  // the piece of each unit this rank updates: its rank, or 0 (the replicated baseline)
  std::vector<shard::ShardUnit> units_;
  shard::ShardContext context_;
  std::unique_ptr<shard::UnitGradientHooks> meter_;  // the kit's, before the student's hooks
  std::unique_ptr<shard::ShardStrategy> strategy_;
  bool stage_hooks_on_ = true;
  int64_t peak_parameter_bytes_ = 0;
  int64_t steps_ = 0;
  int64_t peak_tensor_bytes_ = 0, resident_tensor_bytes_ = 0;  // Note [Counting allocator]
  int64_t pieces_read_bytes_ = 0, checkpoint_bytes_read_ = 0;  // Note [Reading only what a rank keeps]
  // Note [A gather that puts pieces in the wrong place]: piece_norms_[u][r] = rank r's piece of
  // unit u at the start, its 1-norm; which units step 1's forward has checked; what it found.
  std::vector<std::vector<double>> piece_norms_;
  std::vector<bool> gather_checked_;
  std::string gather_finding_;

};

}  // namespace dtlab::shard
