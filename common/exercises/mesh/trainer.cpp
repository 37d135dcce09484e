// GPT-2 on the device mesh data x pipeline x tensor, see mesh/mesh_trainer.h.
#include "dtlab/mesh/mesh_trainer.h"

#include <fmt/format.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "dtlab/core/error.h"
#include "dtlab/core/storage.h"
#include "dtlab/dist/broadcast_state.h"
#include "dtlab/dist/every_rank.h"
#include "dtlab/lm/options.h"
#include "dtlab/pipeline/stage_ranks.h"
#include "dtlab/mesh/device_mesh.h"
#include "dtlab/pipeline/gpt2_layout.h"
#include "dtlab/pipeline/simulate.h"
#include "dtlab/shard/flat_parameters.h"
#include "dtlab/shard/shard_optimizer.h"
#include "dtlab/shard/shard_step.h"
#include "dtlab/shard/units.h"
#include "dtlab/tasks/mesh.h"
#include "dtlab/tasks/pp.h"
#include "dtlab/tasks/zero.h"
#include "dtlab/train/rank_dump.h"
#include "dtlab/tp/gpt2_tp.h"
#include "dtlab/tp/save.h"

namespace dtlab::mesh {
namespace {

int64_t bytes_of(const torch::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

// The plan checked and completed before any group is made, on every rank alike, so that bad
// sizes are an error on every rank, not a hang on those that pass.
MeshPlan checked_plan(MeshPlan plan, const model::Gpt2LMHeadModel& whole, int world) {
  for (const auto& [name, size] : {std::pair{"data", plan.data}, std::pair{"pipeline", plan.pipeline},
                                   std::pair{"tensor", plan.tensor}}) {
    if (size < 1) throw Error(fmt::format("the mesh's {} size is {}: at least 1", name, size));
  }
  if (plan.data * plan.pipeline * plan.tensor != world) {
    throw Error(fmt::format("data {} x pipeline {} x tensor {} is {} ranks, not the world's {}", plan.data,
                            plan.pipeline, plan.tensor, plan.data * plan.pipeline * plan.tensor, world));
  }
  const model::Gpt2Config& config = whole->config();
  if (config.n_head % plan.tensor != 0 || config.inner_dim() % plan.tensor != 0) {
    throw Error(fmt::format("tensor {} does not divide GPT-2's {} attention heads and MLP width {}: each rank "
                            "computes whole heads and an equal part of the MLP", plan.tensor, config.n_head,
                            config.inner_dim()));
  }
  if (plan.micro_batches < 1) throw Error(fmt::format("{} micro-batches: at least 1", plan.micro_batches));
  if (plan.layer_stages.empty()) plan.layer_stages = pipeline::gpt2_layer_devices(whole, plan.pipeline);
  if (static_cast<int64_t>(plan.layer_stages.size()) != whole->num_stages()) {
    throw Error(fmt::format("the mesh's stage plan lists {} layers; GPT-2 has {}", plan.layer_stages.size(),
                            whole->num_stages()));
  }
  for (int s = 0; s < plan.pipeline; ++s) {
    if (std::find(plan.layer_stages.begin(), plan.layer_stages.end(), s) == plan.layer_stages.end()) {
      throw Error(fmt::format("stage {} of {} would hold no layer of GPT-2's {}", s, plan.pipeline,
                              whole->num_stages()));
    }
  }
  return plan;
}

MeshShape shape_of(const MeshPlan& plan) {
  return MeshShape::ordered({{kData, plan.data}, {kPipeline, plan.pipeline}, {kTensor, plan.tensor}}, plan.order);
}

std::string ranks_text(const std::vector<int>& ranks) { return fmt::format("{{{}}}", fmt::join(ranks, ", ")); }

}  // namespace

MeshLayout student_layout(const MeshShape& shape) {
  std::vector<int> sizes;
  for (const Axis& a : shape.axes()) sizes.push_back(a.size);
  std::vector<std::vector<int>> table;
  for (int rank = 0; rank < shape.world(); ++rank) table.push_back(coordinates_of(rank, sizes));
  MeshLayout layout(shape, std::move(table));  // every rank placed once, or an Error naming two
  for (size_t axis = 0; axis < sizes.size(); ++axis) {
    const std::string& name = shape.axes()[axis].name;
    for (int rank = 0; rank < shape.world(); ++rank) {
      const std::vector<int> theirs = group_of(rank, static_cast<int>(axis), sizes);
      const std::vector<int> expected = layout.group(rank, name);
      if (theirs != expected) {
        throw Error(fmt::format("group_of({}, {}, [{}]) gave {}: the ranks that share rank {}'s other coordinates "
                                "(coordinates_of), in the order of their {} coordinate, are {}",
                                rank, axis, fmt::join(sizes, ", "), ranks_text(theirs), rank, name,
                                ranks_text(expected)));
      }
    }
  }
  return layout;
}

namespace {

class MeshTrainer : public lm::GridTrainer {
 public:
  MeshTrainer(MeshPlan plan, model::Gpt2LMHeadModel whole, dist::Group& world)
      : plan_(checked_plan(std::move(plan), whole, world.size())),
        whole_(std::move(whole)),
        mesh_(world, student_layout(shape_of(plan_)), "mesh"),
        model_(whole_, mesh_.group(kTensor)) {
    stage_ = mesh_.coordinate(kPipeline);
    dtype_ = whole_->parameters().front().scalar_type();  // the boundaries' dtype: the model's
    for (int64_t l = 0; l < static_cast<int64_t>(plan_.layer_stages.size()); ++l) {
      if (plan_.layer_stages[static_cast<size_t>(l)] == stage_) my_layers_.push_back(l);
    }
    std::set<std::string> seen;
    for (const int64_t l : my_layers_) {
      for (auto& [name, p] : model_->stage_parameters(l)) {
        if (seen.insert(name).second) mine_.emplace_back(name, p);
      }
    }
    last_ = stage_ == plan_.pipeline - 1;
    shares_tied_weight_ = plan_.pipeline > 1 && (stage_ == 0 || last_);
    neighbours_ = checked_neighbours();
    tied_peer_ = checked_tied_peer();
    // Note [A rank holds its stage's slices].
    for (const auto& p : model_->named_parameters()) {
      if (!seen.count(tp::hf_name(p.key()))) release_storage(p.value());
    }
    release_model();
    if (plan_.zero1) shard_over_data();
  }

  // Note [ZeRO-1 on the mesh]: this rank's slices become views of one flat buffer, cut into the
  // data group's pieces; the student's Zero1 moves them.
  void shard_over_data() {
    dist::Group& data = mesh_.group(kData);
    shard::ShardUnit unit;
    unit.name = fmt::format("stage {} tensor rank {}", stage_, mesh_.coordinate(kTensor));
    unit.flat = std::make_unique<shard::FlatParameters>(mine_, data.size());
    unit.shard_values = unit.flat->shard(unit.flat->values(), data.rank());
    unit.shard_gradients = torch::zeros_like(unit.shard_values);
    units_.push_back(std::move(unit));
    shard::ShardContext context;
    context.units = &units_;
    context.group = &data;
    context.stage_units = {{0}};
    zero1_ = zero::make_zero1(context);
  }

  std::unique_ptr<torch::optim::AdamW> make_optimizer(const train::OptimizerOptions& options) override {
    if (!zero1_) return nullptr;
    std::unique_ptr<torch::optim::AdamW> adamw = shard::make_shard_adamw(units_, mesh_.group(kData).rank(), options);
    optimizer_ = adamw.get();  // run_lm's TrainState owns it for the whole run, summary() included
    return adamw;
  }

  int replicas() const override { return mesh_.size(kData); }
  int replica() const override { return mesh_.coordinate(kData); }
  int ranks_per_replica() const override { return mesh_.size(kPipeline) * mesh_.size(kTensor); }
  std::shared_ptr<torch::nn::Module> module() override { return model_.ptr(); }
  void dump_at(train::RankDumpPlan plan) override { dump_ = std::move(plan); }
  std::string section() const override { return "mesh"; }

  train::StepResult step(train::TrainState& state, const train::StepInput& input) override {
    const bool dump = dump_ && input.step == dump_->step;
    const size_t tensor_records = mesh_.group(kTensor).log().records().size();
    if (dump) train::write_rank_dump(*dump_, train::DumpPoint::kBeforeStep, tensors(false), *input.rows);
    model_->train();
    dist::Group& world = mesh_.world();
    const double seconds = world.log().seconds();
    const data::Batch& b = *input.batch;
    pipeline::StageMicroBatches parts =
        pipeline::split_stage_batch(b, plan_.micro_batches, stage_ == 0, model_->config().n_embd, dtype_);
    const int m = parts.count();
    const std::vector<torch::Tensor>& labels = parts.labels;
    const std::vector<torch::Tensor>& weights = parts.weights;
    // Note [Data-parallel loss]: N, the target tokens of the global batch, on the last stage.
    double scale = 0;
    if (last_) {
      torch::Tensor n = b.label_weights.sum().to(torch::kFloat64).reshape({1});
      if (replicas() > 1) mesh_.group(kData).all_reduce(n, dist::ReduceOp::SUM, "target tokens");
      scale = n.item<double>() > 0 ? replicas() / n.item<double>() : 0.0;
    }
    pipeline::StageCompute compute;
    compute.forward = [this](const torch::Tensor& x) {
      torch::Tensor y = x;
      for (const int64_t l : my_layers_) y = model_->forward_stage(l, y);
      return y;
    };
    if (last_) {
      compute.loss = [&](int i, const torch::Tensor& logits) {
        const auto k = static_cast<size_t>(i);
        return tp::token_loss_sum(*model_, logits, labels[k], weights[k]).sum * scale;
      };
    }
    // Each tensor rank's boundary goes to the same tensor rank of the neighbouring stage.
    pipeline::StagePlace place{&world, stage_, plan_.pipeline, neighbours_.previous, neighbours_.next};
    pipeline::StageStep stage_step(place, compute, std::move(parts.inputs), std::move(parts.output_shapes), dtype_);
    pp::run_stage(stage_step, schedules(m).at(static_cast<size_t>(stage_)));
    stage_step.check_complete();
    // Note [Each group's bytes]: the replica's positions, and the boundary tensors held at once.
    positions_ += b.input_ids.numel();
    peak_stored_ = std::max(peak_stored_, stage_step.peak_stored());
    peak_held_ = std::max(peak_held_, stage_step.peak_held());
    peak_held_bytes_ = std::max(peak_held_bytes_, stage_step.peak_held_bytes());

    if (tied_peer_ >= 0) {
      torch::Tensor& grad = tied().mutable_grad();
      if (!grad.defined()) grad = torch::zeros_like(tied());
      pipeline::exchange_tied_gradient(world, grad, tied_peer_, stage_ == 0);
    }
    std::vector<torch::Tensor> grads;
    for (auto& [name, p] : mine_) {
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      grads.push_back(p.grad());
    }
    {
      // Note [The data group's traffic]: what the student's average sent, from the group's log.
      torch::NoGradGuard no_grad;
      const size_t before = mesh_.group(kData).log().records().size();
      if (zero1_) {
        zero1_->after_backward();  // Note [ZeRO-1 on the mesh]: this rank's piece, averaged
      } else {
        average_over_data(grads, mesh_);
      }
      const std::vector<dist::CommRecord> records = mesh_.group(kData).log().records();
      for (size_t i = before; i < records.size(); ++i) {
        data_operations_ += 1;
        data_bytes_ += records[i].bytes;
      }
      ++steps_;
    }
    if (dump) train::write_rank_dump(*dump_, train::DumpPoint::kAfterSync, tensors(true), *input.rows);
    if (state.max_grad_norm > 0) clip(state.max_grad_norm);
    state.optimizer->step();
    state.scheduler->step();
    if (zero1_) {
      torch::NoGradGuard no_grad;
      zero1_->after_update();  // every replica's slices from the pieces
    }
    model_->zero_grad(/*set_to_none=*/true);
    const std::vector<dist::CommRecord> tensor_log = mesh_.group(kTensor).log().records();
    for (size_t i = tensor_records; i < tensor_log.size(); ++i) {
      tensor_bytes_ += tensor_log[i].bytes;
      (tensor_log[i].op == "all_reduce" ? tensor_all_reduces_ : tensor_other_operations_) += 1;
    }

    // The step's loss on every rank: the last stage's (tensor rank 0's), averaged over the replicas.
    const bool counts = last_ && mesh_.coordinate(kTensor) == 0;
    torch::Tensor loss = torch::tensor({counts ? stage_step.loss() : 0.0}, torch::kFloat64);
    world.all_reduce(loss, dist::ReduceOp::SUM, "loss");
    return train::StepResult{static_cast<float>(loss.item<double>() / replicas()), world.log().seconds() - seconds};
  }

  // Every rank gets the whole model: each stage's slices gathered over its tensor group, then
  // each stage's parameters broadcast from its rank of replica 0 and tensor rank 0.
  void gather_model() override {
    torch::NoGradGuard no_grad;
    for (const auto& p : whole_->parameters()) restore_storage(p, static_cast<size_t>(bytes_of(p)));
    const auto whole = whole_->named_parameters();
    for (const auto& [name, slice] : mine_) {
      const std::vector<torch::Tensor> all =
          mesh_.group(kTensor).all_gather(slice.detach().contiguous(), "mesh gather " + name);
      whole[name].copy_(tp::unshard(name, all, model_->config()));
    }
    std::set<std::string> seen;  // across the stages: the tied weight goes with stage 0
    for (int s = 0; s < plan_.pipeline; ++s) {
      std::vector<torch::Tensor> params;
      for (int64_t l = 0; l < static_cast<int64_t>(plan_.layer_stages.size()); ++l) {
        if (plan_.layer_stages[static_cast<size_t>(l)] != s) continue;
        for (const auto& [name, p] : whole_->stage_parameters(l)) {
          if (seen.insert(name).second) params.push_back(p);
        }
      }
      dist::broadcast_tensors(params, mesh_.world(), rank_at(0, s, 0), fmt::format("stage {} weights", s));
    }
  }
  void release_model() override {
    for (const auto& p : whole_->parameters()) release_storage(p);
  }

  nlohmann::json summary() override {
    int64_t bytes = 0;
    for (const auto& [name, p] : mine_) bytes += bytes_of(p);
    // Per rank, per step (Note [The data group's traffic], Note [Each group's bytes]); the boundary
    // tensors' peaks over the steps; ZeRO-1's AdamW state, measured (Note [ZeRO-1 on the mesh]).
    const double steps = static_cast<double>(std::max<int64_t>(steps_, 1));
    const std::vector<std::vector<double>> each = dist::every_rank(
        mesh_.world(),
        {static_cast<double>(bytes), static_cast<double>(data_operations_) / steps,
         static_cast<double>(data_bytes_) / steps, static_cast<double>(tensor_all_reduces_) / steps,
         static_cast<double>(tensor_other_operations_) / steps, static_cast<double>(tensor_bytes_) / steps,
         static_cast<double>(norm_operations_) / steps, static_cast<double>(norm_bytes_) / steps,
         static_cast<double>(positions_) / steps, static_cast<double>(peak_stored_), static_cast<double>(peak_held_),
         static_cast<double>(peak_held_bytes_),
         zero1_ ? static_cast<double>(shard::optimizer_state_bytes(*optimizer_)) : 0.0},
        "mesh summary");
    const auto column = [&](size_t k) {
      std::vector<double> out;
      for (const std::vector<double>& row : each) out.push_back(row[k]);
      return out;
    };
    std::vector<int64_t> parameter_bytes;
    for (const double b : column(0)) parameter_bytes.push_back(static_cast<int64_t>(b));
    const nlohmann::json sent = sends();
    const nlohmann::json host = host_link(sent, column(2), column(5));
    const model::Gpt2Config& config = model_->config();
    return {{"data", plan_.data}, {"pipeline", plan_.pipeline}, {"tensor", plan_.tensor},
            {"order", mesh_.shape().describe()}, {"micro_batches", plan_.micro_batches},
            {"schedule", pipeline::schedule_kind_name(plan_.schedule)}, {"layer_stages", plan_.layer_stages},
            {"zero_stage", zero1_ ? 1 : 0},
            {"zero1_optimizer_state_bytes", zero1_ ? column(12) : std::vector<double>{}},
            {"n_layer", config.n_layer}, {"n_embd", config.n_embd}, {"vocab_size", config.vocab_size},
            {"n_positions", config.n_positions}, {"inner_dim", config.inner_dim()},
            {"parameter_bytes", parameter_bytes}, {"coordinates", all_coordinates()}, {"sends", sent},
            {"data_operations_per_step", column(1)}, {"data_bytes_per_step", column(2)},
            {"tensor_all_reduces_per_step", column(3)}, {"tensor_other_operations_per_step", column(4)},
            {"tensor_bytes_per_step", column(5)}, {"norm_operations_per_step", column(6)},
            {"norm_bytes_per_step", column(7)}, {"positions_per_step", column(8)},
            {"peak_stored_micro_batches", column(9)}, {"peak_held_micro_batches", column(10)},
            {"peak_activation_bytes", column(11)},
            {"host_link", host}, {"predicted_bytes_sent_per_step", host.at("predicted_bytes_sent_per_step")}};
  }

  // The mesh, every rank's place on it (data, pipeline, tensor), and this rank's stage.
  std::string describe() const override {
    std::string places;
    for (int r = 0; r < mesh_.shape().world(); ++r) {
      places += fmt::format("{}{} d{} p{} t{}", r == 0 ? "" : r % 8 == 0 ? "\n              " : " | ", r,
                            mesh_.layout().coordinate(r, kData), mesh_.layout().coordinate(r, kPipeline),
                            mesh_.layout().coordinate(r, kTensor));
    }
    return fmt::format("  mesh        {}\n  ranks       {}\n  this rank   stage {} of {} (GPT-2 stages {}), tensor rank {} "
                       "of {}, replica {} of {}{}",
                       mesh_.layout().describe(), places, stage_, plan_.pipeline, fmt::join(my_layers_, ", "),
                       mesh_.coordinate(kTensor), plan_.tensor, mesh_.coordinate(kData), plan_.data,
                       plan_.zero1 ? fmt::format("\n  ZeRO-1      AdamW's state on piece {} of {} of this rank's slices "
                                                 "(your tasks/zero over the data group)",
                                                 mesh_.coordinate(kData), plan_.data)
                                   : std::string());
  }

 private:
  // Every rank's [data, pipeline, tensor] coordinates, as the layout the run used places it.
  nlohmann::json all_coordinates() const {
    nlohmann::json out = nlohmann::json::array();
    for (int r = 0; r < mesh_.shape().world(); ++r) {
      out.push_back({mesh_.layout().coordinate(r, kData), mesh_.layout().coordinate(r, kPipeline),
                     mesh_.layout().coordinate(r, kTensor)});
    }
    return out;
  }

  // The sends of the whole run, from the kit's log of this rank's operations (Note [The sends
  // measured] in mesh_trainer.h): for each kind, sends[kind][from][to] counts them, every rank's
  // rows summed over the world (a collective).
  nlohmann::json sends() {
    dist::Group& world = mesh_.world();
    const int n = world.size();
    const std::vector<std::string> kinds = {"activation", "gradient", "tied embedding gradient"};
    const auto kinds_n = static_cast<int64_t>(kinds.size());
    // counts[k][from][to], then the bytes of every kind at [kinds_n][from][to]
    torch::Tensor counts = torch::zeros({kinds_n + 1, n, n}, torch::kFloat64);
    for (const dist::CommRecord& r : world.log().records()) {
      if (r.op != "send" || r.peer < 0 || r.peer >= n) continue;
      for (size_t k = 0; k < kinds.size(); ++k) {
        if (r.tag.rfind(kinds[k], 0) != 0) continue;
        counts[static_cast<int64_t>(k)][world.rank()][r.peer] += 1;
        counts[kinds_n][world.rank()][r.peer] += static_cast<double>(r.bytes);
      }
    }
    world.all_reduce(counts, dist::ReduceOp::SUM, "mesh sends");
    nlohmann::json out = nlohmann::json::object();
    nlohmann::json bytes = nlohmann::json::array();
    for (int from = 0; from < n; ++from) {
      std::vector<double> row;
      for (int to = 0; to < n; ++to) {
        row.push_back(counts[kinds_n][from][to].item<double>() / static_cast<double>(std::max<int64_t>(steps_, 1)));
      }
      bytes.push_back(row);
    }
    out["bytes_per_step"] = bytes;
    for (size_t k = 0; k < kinds.size(); ++k) {
      nlohmann::json rows = nlohmann::json::array();
      for (int from = 0; from < n; ++from) {
        std::vector<int64_t> row;
        for (int to = 0; to < n; ++to) {
          row.push_back(static_cast<int64_t>(counts[static_cast<int64_t>(k)][from][to].item<double>()));
        }
        rows.push_back(row);
      }
      out[kinds[k]] = rows;
    }
    return out;
  }

  // Note [The host link's bytes]: what the ranks of rank 0's host send to other hosts a step, as
  // the kit predicts it from its own log: every send to a rank of another host, and for each data
  // and tensor group a ring all-reduce (Gloo's: each member sends 2(n-1)/n of the payload to the
  // next member, in the order of the axis's coordinate) whose hop from a rank of this host leaves
  // it. Hosts are blocks of consecutive ranks, as launchers place them (local_world_size ranks
  // each; on one machine over loopback, every rank on one host and nothing predicted), from every
  // rank's data and tensor payloads a step (summary() gathers them).
  nlohmann::json host_link(const nlohmann::json& sent, const std::vector<double>& data_bytes,
                           const std::vector<double>& tensor_bytes) {
    dist::Group& world = mesh_.world();
    const int n = world.size(), per_host = std::max(1, world.local_world_size());
    const auto host_of = [&](int r) { return r / per_host; };
    double sends = 0, data_ring = 0, tensor_ring = 0;
    for (int r = 0; r < n; ++r) {
      if (host_of(r) != 0) continue;
      for (int q = 0; q < n; ++q) {
        if (host_of(q) != 0) sends += sent.at("bytes_per_step").at(static_cast<size_t>(r)).at(static_cast<size_t>(q)).get<double>();
      }
      for (const auto& [axis, payload, ring] : {std::tuple{kData, data_bytes[static_cast<size_t>(r)], &data_ring},
                                                std::tuple{kTensor, tensor_bytes[static_cast<size_t>(r)], &tensor_ring}}) {
        const std::vector<int> members = mesh_.layout().group(r, axis);
        const auto size = static_cast<double>(members.size());
        if (members.size() < 2) continue;
        const auto at = std::find(members.begin(), members.end(), r) - members.begin();
        const int next = members[static_cast<size_t>(at + 1) % members.size()];
        if (host_of(next) != 0) *ring += 2 * (size - 1) / size * payload;
      }
    }
    return {{"ranks_per_host", per_host}, {"hosts", (n + per_host - 1) / per_host},
            {"sends_bytes", sends}, {"data_ring_bytes", data_ring}, {"tensor_ring_bytes", tensor_ring},
            {"predicted_bytes_sent_per_step", sends + data_ring + tensor_ring}};
  }

  // The world rank at (data, pipeline, tensor), whatever the mesh's order.
  int rank_at(int data, int stage, int tensor) const {
    std::vector<int> coordinates;
    for (const Axis& a : mesh_.shape().axes()) {
      coordinates.push_back(a.name == kData ? data : a.name == kPipeline ? stage : tensor);
    }
    return mesh_.layout().rank_of(coordinates);
  }
  // The student's stage_neighbours, held to what a pipeline needs: a rank on the previous and the
  // next stage (their pipeline coordinates one less and one more), none past the ends. Which
  // replica and tensor rank they are is the student's (the grader checks it from the sends).
  StageNeighbours checked_neighbours() {
    const StageNeighbours n = stage_neighbours(mesh_);
    const auto check = [&](const char* which, int got, int stage) {
      const bool none = stage < 0 || stage >= plan_.pipeline;
      if (none ? got != -1 : (got < 0 || got >= mesh_.world().size() ||
                              mesh_.layout().coordinate(got, kPipeline) != stage)) {
        throw Error(fmt::format("stage_neighbours on rank {} (stage {} of {}): its {} rank is {}, where {}",
                                mesh_.rank(), stage_, plan_.pipeline, which, got,
                                none ? std::string("there is none (-1)")
                                     : fmt::format("a rank of stage {} was due", stage)));
      }
    };
    check("previous", n.previous, stage_ - 1);
    check("next", n.next, stage_ + 1);
    return n;
  }

  // The student's tied_embedding_peer: a rank of the other end where this stage shares the tied
  // weight, -1 elsewhere.
  int checked_tied_peer() {
    const int peer = tied_embedding_peer(mesh_);
    const int other = stage_ == 0 ? plan_.pipeline - 1 : 0;
    const bool bad = shares_tied_weight_ ? peer < 0 || peer >= mesh_.world().size() ||
                                               mesh_.layout().coordinate(peer, kPipeline) != other
                                         : peer != -1;
    if (bad) {
      throw Error(fmt::format("tied_embedding_peer on rank {} (stage {} of {}) is {}, where {}", mesh_.rank(), stage_,
                              plan_.pipeline, peer,
                              shares_tied_weight_ ? fmt::format("a rank of stage {} was due", other)
                                                  : std::string("this rank holds no second copy (-1)")));
    }
    return peer;
  }

  torch::Tensor tied() const {
    for (const auto& [name, p] : mine_) {
      if (name == "transformer.wte.weight") return p;
    }
    throw Error(fmt::format("stage {} holds no slice of the tied embedding", stage_));
  }

  const std::vector<pipeline::StageSchedule>& schedules(int m) {
    auto it = checked_.find(m);
    if (it != checked_.end()) return it->second;
    const pipeline::ScheduleBuilder build = plan_.schedule == pipeline::ScheduleKind::kGPipe
                                                ? pipeline::ScheduleBuilder(pp::gpipe_schedule)
                                                : pipeline::ScheduleBuilder(pp::one_f_one_b_schedule);
    std::vector<pipeline::StageSchedule> lists = pipeline::stage_schedules(build, plan_.pipeline, m);
    pipeline::check_schedules(lists, m);
    pipeline::check_message_order(lists);
    return checked_.emplace(m, std::move(lists)).first->second;
  }

  // The student's norm of the whole model, then every gradient times min(1, max / (norm + 1e-6)).
  void clip(double max_norm) {
    torch::NoGradGuard no_grad;
    std::vector<SliceGradient> grads = zero1_ ? piece_gradients() : std::vector<SliceGradient>{};
    if (!zero1_) {
      for (const auto& [name, p] : mine_) grads.push_back({name, p.grad(), tp::is_replicated(name)});
    }
    // Note [Each group's bytes]: what the student's norm sent, on the world and every axis's group.
    std::vector<std::pair<dist::Group*, size_t>> logs;
    for (dist::Group* g : {&mesh_.world(), &mesh_.group(kData), &mesh_.group(kPipeline), &mesh_.group(kTensor)}) {
      logs.emplace_back(g, g->log().records().size());
    }
    const double norm = whole_model_gradient_norm(grads, mesh_, zero1_ != nullptr);
    for (const auto& [g, before] : logs) {
      const std::vector<dist::CommRecord> records = g->log().records();
      for (size_t i = before; i < records.size(); ++i) {
        norm_operations_ += 1;
        norm_bytes_ += records[i].bytes;
      }
    }
    const double coefficient = std::min(1.0, max_norm / (norm + 1e-6));
    if (zero1_) {
      for (shard::ShardUnit& unit : units_) unit.shard_gradients.mul_(coefficient);
      return;
    }
    for (const auto& [name, p] : mine_) {
      if (p.grad().defined()) p.grad().mul_(coefficient);
    }
  }

  // Note [ZeRO-1 on the mesh]: each parameter's part of this rank's piece of the averaged gradient,
  // under its name (the padding is no parameter's).
  std::vector<SliceGradient> piece_gradients() const {
    std::vector<SliceGradient> grads;
    const int piece = mesh_.coordinate(kData);
    for (const shard::ShardUnit& unit : units_) {
      const shard::ShardLayout& layout = unit.flat->layout();
      for (const shard::SegmentPiece& p : shard::pieces_in(unit.flat->segments(), layout.begin(piece), layout.end(piece))) {
        if (p.count == 0) continue;
        grads.push_back({p.segment->name, unit.shard_gradients.narrow(0, p.offset - layout.begin(piece), p.count),
                         tp::is_replicated(p.segment->name)});
      }
    }
    return grads;
  }

  // param.<name> (and grad.<name>) of this rank's slices, under their Hugging Face names.
  io::TensorMap tensors(bool gradients) {
    io::TensorMap out;
    for (const auto& [name, p] : mine_) {
      out["param." + name] = p.detach().to(torch::kCPU).clone();
      if (gradients && p.grad().defined() && !zero1_) out["grad." + name] = p.grad().to(torch::kCPU).clone();
    }
    // ZeRO-1: the averaged gradient is in the data group's pieces; assembled whole (a collective).
    if (gradients && zero1_) {
      for (auto& [name, g] : shard::whole_gradients(units_, mesh_.group(kData))) out["grad." + name] = g.to(torch::kCPU);
    }
    return out;
  }

  MeshPlan plan_;
  model::Gpt2LMHeadModel whole_;
  DeviceMesh mesh_;
  tp::TensorParallelGpt2 model_;
  int stage_ = 0;
  torch::ScalarType dtype_ = torch::kFloat32;
  bool last_ = false, shares_tied_weight_ = false;
  StageNeighbours neighbours_;
  int tied_peer_ = -1;
  std::vector<int64_t> my_layers_;
  std::vector<std::pair<std::string, torch::Tensor>> mine_;  // this stage's slices, the tied one once
  std::map<int, std::vector<pipeline::StageSchedule>> checked_;
  std::optional<train::RankDumpPlan> dump_;
  int64_t steps_ = 0, data_operations_ = 0, data_bytes_ = 0;  // Note [The data group's traffic]
  int64_t tensor_bytes_ = 0;  // the tensor group's payloads in the steps (Note [The host link's bytes])
  // Note [Each group's bytes]: the tensor group's operations, the norm's on any group, the
  // replica's positions, the most micro-batches stored and held, and the most boundary bytes held.
  int64_t tensor_all_reduces_ = 0, tensor_other_operations_ = 0, norm_operations_ = 0, norm_bytes_ = 0;
  int64_t positions_ = 0, peak_held_bytes_ = 0;
  int peak_stored_ = 0, peak_held_ = 0;
  // Note [ZeRO-1 on the mesh]: the one unit of this rank's slices and the student's strategy.
  std::vector<shard::ShardUnit> units_;
  std::unique_ptr<shard::ShardStrategy> zero1_;
  const torch::optim::AdamW* optimizer_ = nullptr;  // ZeRO-1's, owned by run_lm's TrainState
};

}  // namespace

std::unique_ptr<lm::GridTrainer> make_mesh_trainer(MeshPlan plan, model::Gpt2LMHeadModel whole, dist::Group& world) {
  return std::make_unique<MeshTrainer>(std::move(plan), std::move(whole), world);
}

std::unique_ptr<lm::GridTrainer> make_mesh_grid_trainer(model::Gpt2LMHeadModel whole, dist::Group& world,
                                                        const lm::LmOptions& o) {
  MeshPlan plan;
  plan.pipeline = o.stages;
  plan.tensor = o.tp;
  if (world.size() % (o.stages * o.tp) != 0) {
    throw Error(fmt::format("--stages {} x --tp {} is {} ranks, which do not divide the world's {}: the world is data "
                            "x pipeline x tensor", o.stages, o.tp, o.stages * o.tp, world.size()));
  }
  plan.data = world.size() / (o.stages * o.tp);
  plan.order = parse_order(o.mesh_order);
  plan.micro_batches = o.micro_batches;
  plan.schedule = pipeline::parse_schedule_kind(o.schedule);
  plan.layer_stages = pipeline::gpt2_layer_devices(whole, o.stages, o.balance);
  plan.zero1 = o.zero_stage == 1;
  return make_mesh_trainer(std::move(plan), std::move(whole), world);
}

std::vector<std::string> parse_order(const std::string& text) {
  std::vector<std::string> order;
  std::string axis;
  for (const char c : text + ",") {
    if (c != ',') {
      axis += c;
      continue;
    }
    if (axis != kData && axis != kPipeline && axis != kTensor) {
      throw Error(fmt::format("--mesh_order {}: '{}' is not an axis of the mesh (data, pipeline, tensor)", text, axis));
    }
    if (std::find(order.begin(), order.end(), axis) != order.end()) {
      throw Error(fmt::format("--mesh_order {}: {} is named twice", text, axis));
    }
    order.push_back(axis);
    axis.clear();
  }
  if (order.size() != 3) {
    throw Error(fmt::format("--mesh_order {}: name each of data, pipeline and tensor once, slowest first", text));
  }
  return order;
}

}  // namespace dtlab::mesh
