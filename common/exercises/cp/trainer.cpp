// The cp exercise's trainer, see cp/cp_trainer.h.
#include "dtlab/cp/cp_trainer.h"

#include <fmt/format.h>
#include <torch/nn/functional/loss.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/cp/gpt2_cp.h"
#include "dtlab/dist/all_reduce_tensors.h"
#include "dtlab/mesh/device_mesh.h"
#include "dtlab/report/tensor_bytes.h"
#include "dtlab/train/rank_dump.h"
#include "dtlab/train/step.h"

namespace dtlab::cp {

double predicted_ring_bytes(int ranks, int64_t batch, int64_t padded, int64_t n_embd, int64_t n_layer) {
  if (ranks < 2) return 0;  // one rank: its keys never leave it
  const double kv = 2.0 * static_cast<double>(batch) * static_cast<double>(padded / ranks) *
                    static_cast<double>(n_embd) * sizeof(float);
  return (3.0 * ranks - 2) * kv * static_cast<double>(n_layer);
}

namespace {

// Checked before any sub-group is made, so that a bad --cp is an error on every rank, not a hang.
mesh::MeshShape grid_shape(int cp, int world) {
  if (cp < 1 || world % cp != 0) {
    throw Error(fmt::format("--cp {} does not divide the world size {}: the world is CP x DP ranks", cp, world));
  }
  return mesh::MeshShape::ordered({{mesh::kData, world / cp}, {mesh::kContext, cp}});
}

class ContextParallelTrainer : public lm::GridTrainer {
 public:
  ContextParallelTrainer(model::Gpt2LMHeadModel whole, dist::Group& world, const lm::LmOptions& o)
      : whole_(whole),
        mesh_(world, grid_shape(o.cp, world.size()), "cp"),
        model_(whole, mesh_.group(mesh::kContext), o.cp_block, o.cp_layout == "balanced") {}

  int replicas() const override { return mesh_.size(mesh::kData); }
  int replica() const override { return mesh_.coordinate(mesh::kData); }
  int ranks_per_replica() const override { return mesh_.size(mesh::kContext); }
  std::shared_ptr<torch::nn::Module> module() override { return whole_.ptr(); }
  void dump_at(train::RankDumpPlan plan) override { dump_ = std::move(plan); }
  std::string section() const override { return "context_parallel"; }
  // Every rank holds the whole model, kept equal by the world's gradient all-reduce.
  void gather_model() override {}

  train::StepResult step(train::TrainState& state, const train::StepInput& input) override {
    const bool dump = dump_ && input.step == dump_->step;
    if (dump) train::write_rank_dump(*dump_, train::DumpPoint::kBeforeStep, *whole_, *input.rows);
    whole_->train();
    dist::Group& world = mesh_.world();
    dist::Group& context = mesh_.group(mesh::kContext);
    const data::Batch& b = *input.batch;
    const SequenceSplit split =
        split_sequence(b.input_ids.size(1), context.rank(), context.size(), model_.balanced());
    const torch::Tensor labels = local_positions(b.labels, split, 0);
    const torch::Tensor weights = local_positions(b.label_weights, split, 0).to(torch::kFloat32);
    // Note [The loss of a split sequence]: N, the target tokens of the global batch.
    torch::Tensor n = weights.sum().to(torch::kFloat64).reshape({1});
    world.all_reduce(n, dist::ReduceOp::SUM, "target tokens");
    const double tokens = std::max(1.0, n.item<double>());
    // The step's waiting: the world's all-reduces (the ring's transfers overlap its compute, and a
    // context group of the whole world logs both).
    const double seconds = world.log().seconds("all_reduce");
    const int64_t sent = context.log().bytes("send");
    report::TensorBytes* meter = report::TensorBytes::installed();
    if (meter) meter->reset_peak();

    namespace F = torch::nn::functional;
    const torch::Tensor logits = model_.forward(b.input_ids, split);
    const torch::Tensor ce = F::cross_entropy(logits.reshape({-1, logits.size(-1)}), labels.reshape(-1),
                                              F::CrossEntropyFuncOptions().reduction(torch::kNone));
    const torch::Tensor loss = (ce * weights.reshape(-1)).sum() / tokens;
    loss.backward();
    sum_gradients(world);
    if (dump) train::write_rank_dump(*dump_, train::DumpPoint::kAfterSync, *whole_, *input.rows);
    train::apply_update(state);
    // Every tensor the process held at the step's peak: the model, its gradients (and their flat
    // copy for the all-reduce), AdamW's state, the activations the backward kept. The process's
    // resident set is results.json's "memory", beside it.
    if (meter) peak_step_bytes_ = std::max(peak_step_bytes_, meter->peak());
    torch::Tensor global = loss.detach().to(torch::kFloat64).reshape({1});
    world.all_reduce(global, dist::ReduceOp::SUM, "cp loss");
    if (input.step >= 2) {  // step 1 warms up; its bytes are the same
      ring_bytes_ += context.log().bytes("send") - sent;
      predicted_bytes_ += predicted_ring_bytes(context.size(), b.input_ids.size(0), split.padded,
                                               model_.config().n_embd, model_.config().n_layer);
      positions_ += b.input_ids.numel();
      padded_positions_ += b.input_ids.size(0) * split.padded;
      ++measured_steps_;
    }
    const double comm = world.log().seconds("all_reduce") - seconds;
    return train::StepResult{static_cast<float>(global.item<double>()), comm};
  }

  nlohmann::json summary() override {
    const double steps = std::max<int64_t>(measured_steps_, 1);
    const model::Gpt2Config& c = model_.config();
    // Every rank's bytes sent and peak, gathered on the world (one row per rank).
    dist::Group& world = mesh_.world();
    torch::Tensor rows = torch::zeros({world.size(), 2}, torch::kFloat64);
    rows[world.rank()][0] = static_cast<double>(ring_bytes_) / steps;
    rows[world.rank()][1] = static_cast<double>(peak_step_bytes_);
    world.all_reduce(rows, dist::ReduceOp::SUM, "cp summary");
    std::vector<double> sent, peaks;
    for (int r = 0; r < world.size(); ++r) {
      sent.push_back(rows[r][0].item<double>());
      peaks.push_back(rows[r][1].item<double>());
    }
    return {{"cp", mesh_.size(mesh::kContext)},
            {"dp", mesh_.size(mesh::kData)},
            {"layout", model_.balanced() ? "balanced" : "contiguous"},
            {"block", model_.block()},
            {"n_layer", c.n_layer},
            {"n_embd", c.n_embd},
            {"n_head", c.n_head},
            {"attention_dropout", 0.0},
            {"measured_steps", measured_steps_},
            {"positions_per_step", static_cast<double>(positions_) / steps},
            {"padded_positions_per_step", static_cast<double>(padded_positions_) / steps},
            {"ring_bytes_sent_per_step", sent},
            {"predicted_ring_bytes_per_step", predicted_bytes_ / steps},
            {"step_peak_tensor_bytes", peaks}};
  }

  std::string describe() const override {
    const int cp = mesh_.size(mesh::kContext), dp = mesh_.size(mesh::kData);
    std::string line = fmt::format(
        "  grid        CP {} x DP {}: context groups of {} consecutive ranks (each holds 2 of {} chunks of every "
        "sequence, {}; attention in blocks of {} keys), {} data-parallel replica{}",
        cp, dp, cp, 2 * cp, model_.balanced() ? "balanced: chunks r and 2CP - 1 - r" : "contiguous: chunks 2r, 2r + 1",
        model_.block(), dp, dp == 1 ? "" : "s");
    if (model_.config().attn_pdrop > 0) {
      line += fmt::format("\n  note        the config's attn_pdrop {} is not applied: blockwise attention never holds "
                          "the probabilities it would drop (Note [Dropout of a split sequence])",
                          model_.config().attn_pdrop);
    }
    return line + fmt::format("\n  mesh        {}", mesh_.layout().describe());
  }

 private:
  // Note [The loss of a split sequence]: one flat all-reduce of every gradient over the world.
  void sum_gradients(dist::Group& world) {
    if (world.size() == 1) return;
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> grads;
    for (const auto& p : whole_->named_parameters()) {
      if (!p.value().grad().defined()) {
        throw Error(p.key() + " has no gradient to sum over the context and data ranks: every parameter takes part "
                              "in every rank's forward");
      }
      grads.push_back(p.value().grad());
    }
    dist::all_reduce_tensors(grads, world, dist::ReduceOp::SUM, "cp gradients");
  }

  model::Gpt2LMHeadModel whole_;
  mesh::DeviceMesh mesh_;
  ContextParallelGpt2 model_;
  std::optional<train::RankDumpPlan> dump_;
  int64_t ring_bytes_ = 0, positions_ = 0, padded_positions_ = 0, measured_steps_ = 0, peak_step_bytes_ = 0;
  double predicted_bytes_ = 0;
};

}  // namespace

std::unique_ptr<lm::GridTrainer> make_context_parallel_trainer(model::Gpt2LMHeadModel whole, dist::Group& world,
                                                               const lm::LmOptions& options) {
  return std::make_unique<ContextParallelTrainer>(std::move(whole), world, options);
}

}  // namespace dtlab::cp
