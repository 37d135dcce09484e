// The pp exercise's step, see pipeline/stage_ranks.h.
#include "dtlab/pipeline/stage_ranks.h"

#include <fmt/format.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <utility>

#include "dtlab/core/error.h"
#include "dtlab/dist/all_reduce_tensors.h"
#include "dtlab/dist/broadcast_state.h"
#include "dtlab/dist/netdev.h"
#include "dtlab/dist/p2p_order.h"
#include "dtlab/dist/subgroup.h"
#include "dtlab/lm/loss.h"
#include "dtlab/pipeline/simulate.h"

namespace dtlab::pipeline {

StageMicroBatches split_stage_batch(const data::Batch& batch, int micro_batches, bool first_stage, int64_t width,
                                    torch::ScalarType dtype) {
  const int m = static_cast<int>(std::min<int64_t>(micro_batches, batch.input_ids.size(0)));
  StageMicroBatches parts{torch::tensor_split(batch.input_ids, m), torch::tensor_split(batch.labels, m),
                          torch::tensor_split(batch.label_weights, m), {}, {}};
  for (const torch::Tensor& ids : parts.ids) {
    parts.inputs.push_back(first_stage ? ids
                                       : torch::empty({ids.size(0), ids.size(1), width},
                                                      torch::TensorOptions(dtype).device(ids.device())));
    parts.output_shapes.push_back({ids.size(0), ids.size(1), width});
  }
  return parts;
}

StageGrid plan_stage_grid(int world, int rank, int stages, int micro_batches, pipeline::ScheduleKind schedule,
                          std::vector<int> layer_stages) {
  if (stages < 1 || world % stages != 0) {
    throw Error(fmt::format("--stages {} does not divide the world size {}: the ranks form pipelines of --stages "
                            "ranks each (rank = pipeline * stages + stage)", stages, world));
  }
  if (micro_batches < 1) throw Error(fmt::format("--micro_batches is {}: at least 1", micro_batches));
  StageGrid g;
  g.stages = stages;
  g.pipelines = world / stages;
  g.micro_batches = micro_batches;
  g.schedule = schedule;
  g.layout = mesh::MeshLayout(mesh::MeshShape({{mesh::kData, g.pipelines}, {mesh::kPipeline, stages}}));
  g.stage = g.layout.coordinate(rank, mesh::kPipeline);
  g.pipeline = g.layout.coordinate(rank, mesh::kData);
  g.layer_stages = std::move(layer_stages);
  return g;
}

StageRankTrainer::StageRankTrainer(StageRankParts parts, StageGrid grid, model::Gpt2LMHeadModel model,
                                   dist::Group& world, std::string interface)
    : parts_(std::move(parts)),
      grid_(std::move(grid)),
      model_(std::move(model)),
      world_(world),
      interface_(std::move(interface)) {
  const bool tied = model_->config().tie_word_embeddings;
  const auto layers = static_cast<int>(grid_.layer_stages.size());
  for (int l = 0; l < layers; ++l) {
    if (grid_.layer_stages[static_cast<size_t>(l)] == grid_.stage) my_layers_.push_back(l);
  }
  std::set<std::string> seen;
  my_parameters_ = parameters_of_stage(grid_.stage, seen);
  if (my_layers_.empty()) throw Error(fmt::format("stage {} holds no layer of GPT-2", grid_.stage));
  shares_tied_weight_ = tied && grid_.stages > 1 && (grid_.stage == 0 || grid_.stage == grid_.stages - 1);
  if (grid_.pipelines > 1) {
    stage_group_ = dist::new_group(world_, grid_.layout.group(world_.rank(), mesh::kData),
                                   fmt::format("stage {}'s data-parallel group", grid_.stage));
  }
}

std::vector<torch::Tensor> StageRankTrainer::parameters_of_stage(int stage, std::set<std::string>& seen) const {
  std::vector<torch::Tensor> params;
  const auto layers = static_cast<int>(grid_.layer_stages.size());
  for (int l = 0; l < layers; ++l) {
    if (grid_.layer_stages[static_cast<size_t>(l)] != stage) continue;
    for (const auto& [name, p] : model_->stage_parameters(l)) {
      if (seen.insert(name).second) params.push_back(p);
    }
  }
  return params;
}

torch::Tensor StageRankTrainer::forward_layers(const torch::Tensor& x) {
  torch::Tensor y = x;
  for (int l : my_layers_) y = model_->forward_stage(l, y);
  return y;
}

const std::vector<pipeline::StageSchedule>& StageRankTrainer::schedules(int m) {
  auto it = checked_.find(m);
  if (it != checked_.end()) return it->second;
  const pipeline::ScheduleBuilder& build =
      grid_.schedule == pipeline::ScheduleKind::kGPipe ? parts_.gpipe : parts_.one_f_one_b;
  std::vector<pipeline::StageSchedule> lists = pipeline::stage_schedules(build, grid_.stages, m);
  // Before anything is sent: an incomplete list or one that deadlocks is an error with the same
  // words on every rank, not a hang until the timeout.
  pipeline::check_schedules(lists, m);
  pipeline::check_message_order(lists);
  return checked_.emplace(m, std::move(lists)).first->second;
}

void exchange_tied_gradient(dist::Group& group, torch::Tensor& grad, int peer, bool first_stage) {
  torch::Tensor theirs = torch::empty_like(grad);
  // Note [One stream per pair] (dist/p2p_order.h): the lower rank posts its send first, the higher
  // its receive first. Both sending first completes on Gloo but deadlocks NCCL above its p2p
  // buffer, and GPT-2 small's tied gradient is 154 MB.
  const std::string tag = "tied embedding gradient";
  dist::PendingWork sent, received;
  if (group.rank() < peer) {
    sent = group.send_async(grad, peer, tag);
    received = group.recv_async(theirs, peer, tag);
  } else {
    received = group.recv_async(theirs, peer, tag);
    sent = group.send_async(grad, peer, tag);
  }
  received.wait();
  sent.wait();
  // The same sum on both: the first stage adds the head's part to its own, the last the
  // embeddings' part to its own, in that order on both, so that the two copies stay bit-equal.
  if (first_stage) {
    grad.add_(theirs);
  } else {
    grad = theirs.add_(grad);
  }
}

void StageRankTrainer::exchange_tied_gradient() {
  torch::Tensor& grad = model_->transformer->wte->weight.mutable_grad();
  if (!grad.defined()) grad = torch::zeros_like(model_->transformer->wte->weight);
  const int peer = grid_.rank_of(grid_.pipeline, grid_.stage == 0 ? grid_.stages - 1 : 0);
  pipeline::exchange_tied_gradient(world_, grad, peer, grid_.stage == 0);
}

void StageRankTrainer::average_over_pipelines() {
  std::vector<torch::Tensor> grads;
  for (torch::Tensor& p : my_parameters_) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad());
  }
  dist::all_reduce_tensors(grads, *stage_group_, dist::ReduceOp::SUM, "stage gradients");
  for (const torch::Tensor& g : grads) g.div_(grid_.pipelines);
}

void StageRankTrainer::clip(double max_norm) {
  torch::NoGradGuard no_grad;
  // The sum of squares of this stage's gradients, the tied weight counted once (on stage 0).
  double squares = 0;
  const bool last_of_several = grid_.stages > 1 && grid_.stage == grid_.stages - 1;
  for (const torch::Tensor& p : my_parameters_) {
    if (!p.grad().defined()) continue;
    if (last_of_several && shares_tied_weight_ && p.is_same(model_->transformer->wte->weight)) continue;
    squares += std::pow(p.grad().norm(2).item<double>(), 2);
  }
  torch::Tensor total = torch::tensor({squares}, torch::kFloat64);
  world_.all_reduce(total, dist::ReduceOp::SUM, "gradient norm");
  const double norm = std::sqrt(total.item<double>() / grid_.pipelines);  // every pipeline holds the same
  const double coefficient = std::min(1.0, max_norm / (norm + 1e-6));
  for (const torch::Tensor& p : my_parameters_) {
    if (p.grad().defined()) p.grad().mul_(static_cast<float>(coefficient));
  }
}

namespace {

constexpr int64_t kTimelineStep = 3;  // the step whose timeline is kept: after the first steps' allocations

// The highest operation number in the log: what this rank posted before now.
int64_t last_posted(const dist::CommLog& log) {
  int64_t last = 0;
  for (const dist::CommRecord& r : log.records()) last = std::max(last, r.sequence);
  return last;
}

// Note [One stream per pair]: a pp message's tag as two numbers that travel in a tensor, and back.
std::pair<double, double> tag_code(const std::string& tag) {
  for (const auto& [kind, prefix] : {std::pair{0.0, "activation "}, std::pair{1.0, "gradient "}}) {
    const std::string p = prefix;
    if (tag.rfind(p, 0) == 0) return {kind, std::stod(tag.substr(p.size()))};
  }
  return {tag == "tied embedding gradient" ? 2.0 : 3.0, 0.0};
}

std::string tag_of(double kind, double micro) {
  if (kind == 0) return pipeline::StageStep::activation_tag(static_cast<int>(micro));
  if (kind == 1) return pipeline::StageStep::gradient_tag(static_cast<int>(micro));
  return kind == 2 ? "tied embedding gradient" : "";
}

}  // namespace

void StageRankTrainer::record(int64_t step, const pipeline::StageStep& stage_step) {
  peak_stored_ = std::max(peak_stored_, stage_step.peak_stored());
  peak_held_ = std::max(peak_held_, stage_step.peak_held());
  peak_bytes_ = std::max(peak_bytes_, stage_step.peak_held_bytes());
  if (step <= kTimelineStep) {
    timeline_step_ = step;
    timeline_ = stage_step.records();
    timeline_micro_batches_ = stage_step.micro_batches();
  }
}

// Note [Bytes of a stage rank]: per step, a stage other than the last sends each micro-batch's
// activation [rows, seq, width] in float32 to the next and receives its gradient back; a stage
// other than the first receives the activations and sends the gradients; with tied embeddings
// the first and the last stage send each other the embedding's gradient [vocab, width]. Summed
// over the micro-batches that is the pipeline's whole batch per boundary and direction: rows x
// seq x width x 4 bytes. What else crosses (the step's two scalar all_reduces, the rendezvous
// store's heartbeats, TCP/IP headers) is what the measured bytes have beyond the prediction.
double StageRankTrainer::predicted_bytes_sent(int64_t rows, int64_t seq) const {
  const double boundary = static_cast<double>(rows * seq * model_->config().n_embd) * 4.0;
  double bytes = 0;
  if (grid_.stage + 1 < grid_.stages) bytes += boundary;  // activations forward
  if (grid_.stage > 0) bytes += boundary;                 // gradients back
  if (shares_tied_weight_) bytes += static_cast<double>(model_->transformer->wte->weight.numel()) * 4.0;
  return bytes;
}

train::StepResult StageRankTrainer::step(train::TrainState& state, const train::StepInput& input) {
  const std::optional<dist::InterfaceCounters> before =
      interface_.empty() ? std::nullopt : std::optional<dist::InterfaceCounters>(dist::read_counters(interface_));
  train::StepResult result = run_step(state, input);
  if (before && input.step >= 2) {
    const dist::InterfaceCounters after = dist::read_counters(interface_);
    measured_tx_ += static_cast<double>(after.tx_bytes - before->tx_bytes);
    measured_rx_ += static_cast<double>(after.rx_bytes - before->rx_bytes);
    predicted_tx_ += predicted_bytes_sent(input.batch->input_ids.size(0), input.batch->input_ids.size(1));
    ++measured_steps_;
  }
  return result;
}

train::StepResult StageRankTrainer::run_step(train::TrainState& state, const train::StepInput& input) {
  const bool dump = dump_ && input.step == dump_->step;
  if (dump) train::write_rank_dump(*dump_, train::DumpPoint::kBeforeStep, *state.module, *input.rows);
  state.module->train();
  const data::Batch& b = *input.batch;
  StageMicroBatches parts =
      split_stage_batch(b, grid_.micro_batches, grid_.stage == 0, model_->config().n_embd, torch::kFloat32);
  const int m = parts.count();
  const std::vector<torch::Tensor>& labels = parts.labels;
  const std::vector<torch::Tensor>& weights = parts.weights;
  const bool last = grid_.stage == grid_.stages - 1;

  // Note [Data-parallel loss]: N, the target tokens of the whole global batch (the last stages'
  // sub-group adds the pipelines' counts).
  double tokens = 0;
  if (last) {
    torch::Tensor n = b.label_weights.sum().to(torch::kFloat64).reshape({1});
    if (stage_group_) stage_group_->all_reduce(n, dist::ReduceOp::SUM, "target tokens");
    tokens = n.item<double>();
  }
  const double scale = tokens > 0 ? grid_.pipelines / tokens : 0.0;
  pipeline::StageCompute compute;
  compute.forward = [this](const torch::Tensor& x) { return forward_layers(x); };
  compute.sleep = grid_.action_sleep;
  if (last) {
    compute.loss = [&](int i, const torch::Tensor& logits) {
      const auto k = static_cast<size_t>(i);
      const torch::Tensor w = weights[k];
      // weighted_token_loss is the mean over the micro-batch's target tokens; times their count
      // it is their sum.
      return lm::weighted_token_loss(logits, labels[k], w) * (w.sum().item<double>() * scale);
    };
  }
  pipeline::StagePlace place{&world_, grid_.stage, grid_.stages,
                             grid_.stage > 0 ? grid_.rank_of(grid_.pipeline, grid_.stage - 1) : -1,
                             last ? -1 : grid_.rank_of(grid_.pipeline, grid_.stage + 1)};
  pipeline::StageStep stage_step(place, compute, std::move(parts.inputs), std::move(parts.output_shapes),
                                 torch::kFloat32);
  // Note [One stream per pair]: the sends and receives of the timeline step, in the order this
  // rank posted them (summary() checks every pair's for NCCL).
  const bool keep_order = input.step <= kTimelineStep;
  const int64_t posted_before = keep_order ? last_posted(world_.log()) : 0;
  parts_.run_stage(stage_step, schedules(m).at(static_cast<size_t>(grid_.stage)));
  stage_step.check_complete();

  if (shares_tied_weight_) exchange_tied_gradient();
  if (keep_order) {
    p2p_.clear();
    for (const dist::CommRecord& r : world_.log().records()) {
      if (r.sequence > posted_before && (r.op == "send" || r.op == "recv")) p2p_.push_back(r);
    }
  }
  if (stage_group_) average_over_pipelines();
  if (dump) train::write_rank_dump(*dump_, train::DumpPoint::kAfterSync, *state.module, *input.rows);
  if (state.max_grad_norm > 0) clip(state.max_grad_norm);
  state.optimizer->step();
  state.scheduler->step();
  state.module->zero_grad(/*set_to_none=*/true);
  record(input.step, stage_step);

  // The step's loss on every rank: the last stages' losses, averaged over the pipelines.
  torch::Tensor loss = torch::tensor({last ? stage_step.loss() : 0.0}, torch::kFloat64);
  world_.all_reduce(loss, dist::ReduceOp::SUM, "loss");
  return train::StepResult{static_cast<float>(loss.item<double>() / grid_.pipelines), 0.0};
}

void StageRankTrainer::gather_model() {
  std::set<std::string> seen;  // across the stages: the tied weight goes with stage 0
  for (int s = 0; s < grid_.stages; ++s) {
    const std::vector<torch::Tensor> params = parameters_of_stage(s, seen);
    if (!params.empty()) dist::broadcast_tensors(params, world_, grid_.rank_of(0, s), fmt::format("stage {} weights", s));
  }
}

nlohmann::json StageRankTrainer::summary() {
  // Every rank's peaks and timeline, gathered (the same shapes on every rank: 2m records each).
  torch::Tensor peaks = torch::tensor({static_cast<double>(peak_stored_), static_cast<double>(peak_bytes_),
                                       static_cast<double>(peak_held_)}, torch::kFloat64);
  const std::vector<torch::Tensor> all_peaks = world_.all_gather(peaks, "pipeline peaks");
  torch::Tensor mine = torch::zeros({static_cast<int64_t>(timeline_.size()), 4}, torch::kFloat64);
  for (size_t k = 0; k < timeline_.size(); ++k) {
    const pipeline::ActionRecord& r = timeline_[k];
    const auto row = static_cast<int64_t>(k);
    mine[row][0] = r.action.op == pipeline::StageOp::kForward ? 0.0 : 1.0;
    mine[row][1] = r.action.micro;
    mine[row][2] = r.start;
    mine[row][3] = r.end;
  }
  const std::vector<torch::Tensor> all_events = world_.all_gather(mine, "pipeline timeline");
  nlohmann::json j;
  j["stages"] = grid_.stages;
  j["pipelines"] = grid_.pipelines;
  j["micro_batches"] = grid_.micro_batches;
  j["schedule"] = pipeline::schedule_kind_name(grid_.schedule);
  j["layer_stages"] = grid_.layer_stages;
  std::vector<int> stored, held;
  std::vector<int64_t> bytes;
  for (const torch::Tensor& t : all_peaks) {
    stored.push_back(static_cast<int>(t[0].item<double>()));
    bytes.push_back(static_cast<int64_t>(t[1].item<double>()));
    held.push_back(static_cast<int>(t[2].item<double>()));
  }
  // Per rank. Stored: for the backward (the schedule's count). Held: stored or in a send not yet
  // waited for, and peak_activation_bytes their bytes (Note [Held, not only stored]).
  j["peak_stored_micro_batches"] = stored;
  j["peak_held_micro_batches"] = held;
  // Note [Bytes of a stage rank]: per rank, per step (steps 2 on).
  const double steps = std::max<int64_t>(measured_steps_, 1);
  torch::Tensor traffic = torch::tensor({predicted_tx_ / steps, measured_tx_ / steps, measured_rx_ / steps,
                                         static_cast<double>(measured_steps_)}, torch::kFloat64);
  const std::vector<torch::Tensor> all_traffic = world_.all_gather(traffic, "pipeline traffic");
  if (!interface_.empty()) {
    nlohmann::json ranks = nlohmann::json::array();
    for (size_t r = 0; r < all_traffic.size(); ++r) {
      const torch::Tensor& t = all_traffic[r];
      ranks.push_back({{"rank", r}, {"stage", static_cast<int>(r) % grid_.stages},
                       {"predicted_sent_bytes_per_step", t[0].item<double>()},
                       {"measured_tx_bytes_per_step", t[1].item<double>()},
                       {"measured_rx_bytes_per_step", t[2].item<double>()}, {"steps", t[3].item<double>()}});
    }
    // On loopback every rank of the host counts every rank's bytes: the per-rank figures then
    // mean nothing (network-namespace hosts have an interface each).
    j["traffic"] = {{"interface", interface_}, {"shared_interface", interface_ == "lo"}, {"ranks", ranks}};
  }
  j["peak_activation_bytes"] = bytes;
  // Note [One stream per pair]: every rank's sends and receives of the timeline step (op, peer,
  // number, tag), gathered, and whether NCCL could pair them ("" when it could).
  torch::Tensor count = torch::tensor({static_cast<double>(p2p_.size())}, torch::kFloat64);
  int64_t most = 1;
  const std::vector<torch::Tensor> counts = world_.all_gather(count, "pipeline messages");
  for (const torch::Tensor& c : counts) most = std::max(most, static_cast<int64_t>(c.item<double>()));
  torch::Tensor rows = torch::full({most, 5}, -1.0, torch::kFloat64);
  for (size_t k = 0; k < p2p_.size(); ++k) {
    const auto row = static_cast<int64_t>(k);
    const auto [kind, micro] = tag_code(p2p_[k].tag);
    rows[row][0] = p2p_[k].op == "send" ? 0.0 : 1.0;
    rows[row][1] = p2p_[k].peer;
    rows[row][2] = static_cast<double>(p2p_[k].sequence);
    rows[row][3] = kind;
    rows[row][4] = micro;
  }
  const std::vector<torch::Tensor> all_rows = world_.all_gather(rows, "pipeline message order");
  std::vector<std::vector<dist::CommRecord>> logs(all_rows.size());
  for (size_t r = 0; r < all_rows.size(); ++r) {
    const auto n = static_cast<int64_t>(counts[r].item<double>());
    for (int64_t k = 0; k < n; ++k) {
      const torch::Tensor row = all_rows[r][k];
      dist::CommRecord c;
      c.op = row[0].item<double>() == 0 ? "send" : "recv";
      c.peer = static_cast<int>(row[1].item<double>());
      c.sequence = static_cast<int64_t>(row[2].item<double>());
      c.tag = tag_of(row[3].item<double>(), row[4].item<double>());
      logs[r].push_back(c);
    }
  }
  std::string problem;
  try {
    dist::check_stream_order(logs);
  } catch (const Error& e) {
    problem = e.what();
  }
  j["p2p_order"] = {{"step", timeline_step_}, {"problem", problem}};
  // Pipeline 0's ranks, one row per stage, seconds from the first action of any of them.
  double origin = INFINITY, end = -INFINITY, busy = 0;
  for (int s = 0; s < grid_.stages; ++s) {
    const torch::Tensor& t = all_events[static_cast<size_t>(grid_.rank_of(0, s))];
    for (int64_t k = 0; k < t.size(0); ++k) {
      origin = std::min(origin, t[k][2].item<double>());
      end = std::max(end, t[k][3].item<double>());
    }
  }
  nlohmann::json events = nlohmann::json::array();
  for (int s = 0; s < grid_.stages; ++s) {
    const torch::Tensor& t = all_events[static_cast<size_t>(grid_.rank_of(0, s))];
    for (int64_t k = 0; k < t.size(0); ++k) {
      const double start = t[k][2].item<double>() - origin, stop = t[k][3].item<double>() - origin;
      busy += stop - start;
      events.push_back({{"stage", s}, {"rank", grid_.rank_of(0, s)},
                        {"pass", t[k][0].item<double>() == 0 ? "forward" : "backward"},
                        {"micro", static_cast<int>(t[k][1].item<double>())}, {"start", start}, {"end", stop}});
    }
  }
  const double span = events.empty() ? 0 : end - origin;
  j["timeline_step"] = timeline_step_;
  j["timeline"] = {{"stages", grid_.stages}, {"micro_batches", timeline_micro_batches_}, {"span", span},
                   {"bubble_fraction", span > 0 ? 1 - busy / (grid_.stages * span) : 0.0}, {"events", events}};
  return j;
}

train::StepFunction stage_rank_step(StageRankTrainer& trainer) {
  return [&trainer](train::TrainState& state, const train::StepInput& input) { return trainer.step(state, input); };
}

}  // namespace dtlab::pipeline
