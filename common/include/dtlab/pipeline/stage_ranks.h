// GPT-2 trained by a pipeline whose stages are ranks (the pp exercise): the grid of ranks, the
// kit's step around the student's schedule and protocol, and what the ranks' timelines add up
// to. The kit's part is what makes the stage ranks' update the one a single process makes on the
// same global batch:
//   * the loss of micro-batch i on the last stage is D / N * (sum of its target tokens' cross-
//     entropy), N the target tokens of the global batch, D the pipelines (Note [Data-parallel
//     loss] in lm/loss.h): its gradients summed over the micro-batches and averaged over the
//     pipelines are the gradient of the global batch's mean loss;
//   * GPT-2's tied embedding is used by the first stage (wte) and the last (the head): each
//     holds a copy, so each adds the other's gradient (one exchange) and both apply the same
//     update;
//   * each stage's gradients are averaged over its data-parallel group (the ranks that hold the
//     same stage in the other pipelines: a sub-group, dist/subgroup.h);
//   * clipping takes the norm of the whole model: the stages' sums of squares, all-reduced.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dtlab/data/batch.h"
#include "dtlab/dist/group.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/pipeline/stage_schedule.h"
#include "dtlab/mesh/layout.h"
#include "dtlab/pipeline/stage_step.h"
#include "dtlab/train/loop.h"
#include "dtlab/train/rank_dump.h"

namespace dtlab::lm {
struct LmOptions;
}  // namespace dtlab::lm

namespace dtlab::pipeline {


// What the pp exercise brings: its two schedule builders and its protocol (dtlab/tasks/pp.h), and
// the grading aid --probe (lm::LmOptions::probe), which returns the exit code.
struct StageRankParts {
  pipeline::ScheduleBuilder gpipe;
  pipeline::ScheduleBuilder one_f_one_b;
  std::function<void(pipeline::StageStep&, const pipeline::StageSchedule&)> run_stage;
  std::function<int(const lm::LmOptions&)> probe;
};

// The grid: the device mesh data (pipelines) x pipeline (stages) in that order (mesh/layout.h,
// Note [The mesh's order]), rank = pipeline * stages + stage, so that a pipeline's stages are
// neighbouring ranks (on one host with local ranks, the activations stay local).
struct StageGrid {
  int stages = 1, pipelines = 1, micro_batches = 1;
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::k1F1B;
  int stage = 0, pipeline = 0;    // this rank's place: its pipeline and data coordinates
  std::vector<int> layer_stages;  // the stage of each of GPT-2's layers (Note [Stages])
  std::chrono::milliseconds action_sleep{0};  // --stage_sleep_ms (a grading aid)
  mesh::MeshLayout layout{mesh::MeshShape({{mesh::kData, 1}, {mesh::kPipeline, 1}})};
  int rank_of(int pipeline_index, int stage_index) const { return layout.rank_of({pipeline_index, stage_index}); }
};

// The tied embedding's gradient summed between the first stage and the last of one pipeline: each
// sends its grad to peer and adds peer's, the same sum in the same order on both (first_stage:
// this rank holds the embeddings). Sends and receives in an order NCCL can pair (Note [One
// stream per pair] in dist/p2p_order.h). grad must be contiguous, on the group's device.
void exchange_tied_gradient(dist::Group& group, torch::Tensor& grad, int peer, bool first_stage);

// A GPT-2 stage's share of a batch in micro-batches (pp's stage ranks, the mesh's stages): m parts
// whose rows differ by at most one (a batch of 5 in 4: 2, 1, 1, 1), m = min(micro_batches, rows).
// inputs: the first stage's are the token ids; every other stage's an empty [rows, T, width]
// buffer of `dtype` that the previous stage's activation arrives in. Every stage's output is
// [rows, T, width].
struct StageMicroBatches {
  std::vector<torch::Tensor> ids, labels, weights, inputs;
  std::vector<std::vector<int64_t>> output_shapes;
  int count() const { return static_cast<int>(ids.size()); }
};
StageMicroBatches split_stage_batch(const data::Batch& batch, int micro_batches, bool first_stage, int64_t width,
                                    torch::ScalarType dtype);

// The grid of `world` ranks for `stages` stages: an Error naming --stages unless it divides the
// world size.
StageGrid plan_stage_grid(int world, int rank, int stages, int micro_batches, pipeline::ScheduleKind schedule,
                          std::vector<int> layer_stages);

class StageRankTrainer {
 public:
  // Every rank of the world, at the same point (it makes the data-parallel sub-groups).
  // interface: the network interface this rank's traffic leaves by, whose byte counters the
  // summary reads (empty: not measured).
  StageRankTrainer(StageRankParts parts, StageGrid grid, model::Gpt2LMHeadModel model, dist::Group& world,
                   std::string interface = "");

  // The step: this rank's stage of the pipeline over the minibatch, then the kit's update.
  train::StepResult step(train::TrainState& state, const train::StepInput& input);

  // The grader's dumps (train/rank_dump.h) at plan.step: before it, and once the gradients are
  // final (tied weight summed, averaged over the pipelines), before clipping. A stage rank's
  // second file holds the gradients of its stage's parameters only.
  void dump_at(train::RankDumpPlan plan) { dump_ = std::move(plan); }

  // Every rank gets every stage's weights from pipeline 0 (before evaluation and saving: each
  // rank trains only its stage's). A collective: every rank calls it at the same point.
  void gather_model();

  // Per stage rank: the most micro-batches stored at once, and held (Note [Held, not only
  // stored]) with their bytes; one step's timeline of every rank on one clock (seconds from the
  // step's first action), and the bubble measured on it; whether that step's sends and receives
  // were posted in an order NCCL can pair ("p2p_order", Note [One stream per pair]); the bytes
  // each rank sends and receives per step, predicted from the boundaries' shapes and measured on
  // its interface (steps 2 on). A collective (it gathers the ranks' figures).
  nlohmann::json summary();

 private:
  train::StepResult run_step(train::TrainState& state, const train::StepInput& input);
  double predicted_bytes_sent(int64_t rows, int64_t seq) const;
  // The parameters of stage `stage`'s layers whose names `seen` does not hold yet (it gains them):
  // a weight two stages share (the tied embedding) goes with the first to ask.
  std::vector<torch::Tensor> parameters_of_stage(int stage, std::set<std::string>& seen) const;
  // This rank's layers, input -> output.
  torch::Tensor forward_layers(const torch::Tensor& x);
  // The schedule of every stage for m micro-batches, simulated once per m (pipeline/simulate.h).
  const std::vector<pipeline::StageSchedule>& schedules(int micro_batches);
  void exchange_tied_gradient();
  void average_over_pipelines();
  void clip(double max_norm);
  void record(int64_t step, const pipeline::StageStep& stage_step);

  StageRankParts parts_;
  StageGrid grid_;
  model::Gpt2LMHeadModel model_;
  dist::Group& world_;
  std::unique_ptr<dist::Group> stage_group_;  // this stage's data-parallel group; null for 1 pipeline
  std::vector<int> my_layers_;
  std::vector<torch::Tensor> my_parameters_;  // the tied weight once, on the stages that use it
  bool shares_tied_weight_ = false;           // the first or the last stage of several, tied
  std::map<int, std::vector<pipeline::StageSchedule>> checked_;
  int peak_stored_ = 0, peak_held_ = 0;  // Note [Held, not only stored] (pipeline/stage_step.h)
  int64_t peak_bytes_ = 0;
  int64_t timeline_step_ = 0;
  std::vector<pipeline::ActionRecord> timeline_;  // this rank's, at timeline_step_
  std::vector<dist::CommRecord> p2p_;  // its sends and receives of that step (Note [One stream per pair])
  int timeline_micro_batches_ = 0;
  // Note [Bytes of a stage rank]: what the boundaries carry, predicted, and what crossed the
  // interface, measured, summed over the steps after the first.
  std::string interface_;
  double predicted_tx_ = 0, measured_tx_ = 0, measured_rx_ = 0;
  int64_t measured_steps_ = 0;
  std::optional<train::RankDumpPlan> dump_;
};

// The step as the loop calls it.
train::StepFunction stage_rank_step(StageRankTrainer& trainer);

}  // namespace dtlab::pipeline
