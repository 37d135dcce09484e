// The tp exercise's trainer, see tp/tp_trainer.h.
#include "dtlab/tp/tp_trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/core/storage.h"
#include "dtlab/lm/options.h"
#include "dtlab/report/tensor_bytes.h"
#include "dtlab/tp/gpt2_tp.h"
#include "dtlab/tp/grid.h"
#include "dtlab/tp/save.h"
#include "dtlab/tp/tp_step.h"

namespace dtlab::tp {
namespace {

int64_t bytes_of(const torch::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

// Checked before any sub-group is made, so that a bad --tp is an error on every rank, not a hang.
int checked_tp(int tp, int world, const model::Gpt2Config& config) {
  if (tp < 1 || world % tp != 0) {
    throw Error(fmt::format("--tp {} does not divide the world size {}: the world is TP x DP ranks", tp, world));
  }
  if (config.n_head % tp != 0 || config.inner_dim() % tp != 0) {
    throw Error(fmt::format("--tp {} does not divide GPT-2's {} attention heads and MLP width {}: each rank "
                            "computes whole heads and an equal part of the MLP", tp, config.n_head,
                            config.inner_dim()));
  }
  return tp;
}

class TensorParallelTrainer : public lm::GridTrainer {
 public:
  TensorParallelTrainer(model::Gpt2LMHeadModel whole, dist::Group& world, int tp)
      : whole_(std::move(whole)),
        grid_(world, checked_tp(tp, world.size(), whole_->config()), "tp"),
        model_(whole_, grid_.tensor()) {
    release_model();  // Note [Memory a rank holds]: the slices are this rank's model now
  }

  int replicas() const override { return grid_.dp(); }
  int replica() const override { return grid_.dp_rank(); }
  int ranks_per_replica() const override { return grid_.tp(); }
  std::shared_ptr<torch::nn::Module> module() override { return model_.ptr(); }
  void dump_at(train::RankDumpPlan plan) override { dump_ = std::move(plan); }
  std::string section() const override { return "tensor_parallel"; }

  train::StepResult step(train::TrainState& state, const train::StepInput& input) override {
    const bool dump = dump_ && input.step == dump_->step;
    if (dump) train::write_rank_dump(*dump_, train::DumpPoint::kBeforeStep, tensors(false), *input.rows);
    model_->train();
    const data::Batch& b = *input.batch;
    // Note [Data-parallel loss]: N, the target tokens of the global batch.
    torch::Tensor n = b.label_weights.sum().to(torch::kFloat64).reshape({1});
    if (grid_.dp() > 1) grid_.data().all_reduce(n, dist::ReduceOp::SUM, "target tokens");
    const double tokens = n.item<double>();
    const double scale = tokens > 0 ? grid_.dp() / tokens : 0.0;
    const int64_t tp_bytes = grid_.tensor().log().bytes("all_reduce");
    const size_t tp_records = grid_.tensor().log().records().size();
    report::TensorBytes* meter = report::TensorBytes::installed();
    if (meter) meter->reset_largest();
    const double seconds = grid_.tensor().log().seconds() + grid_.data().log().seconds();
    const TensorParallelStepResult r = tensor_parallel_step(
        *model_, *state.optimizer, grid_,
        [&] { return token_loss_sum(*model_, model_->forward(b.input_ids), b.labels, b.label_weights).sum * scale; },
        state.max_grad_norm, [&](TensorParallelGpt2Impl&) {
          if (dump) train::write_rank_dump(*dump_, train::DumpPoint::kAfterSync, tensors(true), *input.rows);
        });
    state.scheduler->step();
    if (input.step >= 2) {  // step 1 warms up; its bytes are the same
      tp_bytes_ += grid_.tensor().log().bytes("all_reduce") - tp_bytes;
      // Every operation of the tensor group in the step, by kind (Note [Bytes of a tensor-parallel
      // step]): the grader holds the all-reduces to their count and finds any other kind.
      const std::vector<dist::CommRecord> records = grid_.tensor().log().records();
      for (size_t i = tp_records; i < records.size(); ++i) {
        OpTally& t = tp_ops_[records[i].op];
        ++t.count;
        t.bytes += records[i].bytes;
      }
      positions_ += b.input_ids.numel();
      // The largest tensor of the step against the logits this rank computes: B x T rows of its
      // V/TP columns (the vocabulary-parallel loss never holds more; gathered logits are TP times).
      if (meter) {
        largest_tensor_bytes_ = std::max(largest_tensor_bytes_, meter->largest());
        logits_slice_bytes_ = std::max(logits_slice_bytes_, b.input_ids.numel() * model_->vocab().rows *
                                                                 static_cast<int64_t>(sizeof(float)));
      }
      ++measured_steps_;
    }
    const double comm = grid_.tensor().log().seconds() + grid_.data().log().seconds() - seconds;
    return train::StepResult{static_cast<float>(r.global_loss), comm};
  }

  // The whole model exists only while it is evaluated or saved: made again, filled by gathering
  // every rank's slices, and given back after (Note [Memory a rank holds]).
  void gather_model() override {
    for (const auto& p : whole_->parameters()) restore_storage(p, static_cast<size_t>(bytes_of(p)));
    gather_tensor_parallel_gpt2_into(*model_, grid_.tensor(), *whole_);
  }
  void release_model() override {
    for (const auto& p : whole_->parameters()) release_storage(p);
  }

  // {"all_reduce": {"count": 30, "bytes": ...}, ...}: the tensor group's operations of a step.
  nlohmann::json tp_operations(double steps) const {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [op, t] : tp_ops_) {
      out[op] = {{"count", static_cast<double>(t.count) / steps}, {"bytes", static_cast<double>(t.bytes) / steps}};
    }
    return out;
  }

  nlohmann::json summary() override {
    torch::NoGradGuard no_grad;
    // Every rank's parameter bytes and checksums, gathered on the world (one row per rank).
    const int world = grid_.world().size(), rank = grid_.world().rank();
    torch::Tensor rows = torch::zeros({world, 3}, torch::kFloat64);
    double all = 0, replicated = 0;
    int64_t bytes = 0;
    for (const auto& p : model_->named_parameters()) {
      const double sum = p.value().detach().abs().sum().to(torch::kCPU, torch::kFloat64).item<double>();
      all += sum;
      if (is_replicated(hf_name(p.key()))) replicated += sum;
      bytes += bytes_of(p.value());
    }
    rows[rank][0] = static_cast<double>(bytes);
    rows[rank][1] = replicated;
    rows[rank][2] = all;
    grid_.world().all_reduce(rows, dist::ReduceOp::SUM, "tp summary");
    std::vector<int64_t> parameter_bytes;
    std::vector<double> replicated_sums, all_sums;
    for (int r = 0; r < world; ++r) {
      parameter_bytes.push_back(static_cast<int64_t>(rows[r][0].item<double>()));
      replicated_sums.push_back(rows[r][1].item<double>());
      all_sums.push_back(rows[r][2].item<double>());
    }
    int64_t whole_bytes = 0;
    for (const auto& p : whole_->parameters()) whole_bytes += bytes_of(p);
    const model::Gpt2Config& c = model_->config();
    const double steps = std::max<int64_t>(measured_steps_, 1);
    // What a ring all-reduce puts on the wire from each rank: 2(N-1)/N of the buffer, for the
    // tensor group's activations and the data group's gradient (this rank's slices' bytes).
    const double tp = grid_.tp(), dp = grid_.dp();
    const double sent = 2 * (tp - 1) / tp * predicted_tp_bytes(static_cast<double>(positions_) / steps) +
                        2 * (dp - 1) / dp * static_cast<double>(bytes);
    return {{"tp", grid_.tp()},
            {"dp", grid_.dp()},
            {"n_layer", c.n_layer},
            {"n_embd", c.n_embd},
            {"n_head", c.n_head},
            {"inner", c.inner_dim()},
            {"vocab_size", c.vocab_size},
            {"padded_vocab", model_->vocab().padded},
            {"whole_bytes", whole_bytes},
            {"parameter_bytes", parameter_bytes},
            {"replicated_checksums", replicated_sums},
            {"checksums", all_sums},
            {"measured_steps", measured_steps_},
            {"positions_per_step", static_cast<double>(positions_) / steps},
            {"tp_bytes_per_step", static_cast<double>(tp_bytes_) / steps},
            {"tp_operations_per_step", tp_operations(steps)},
            {"largest_tensor_bytes", largest_tensor_bytes_},
            {"logits_slice_bytes", logits_slice_bytes_},
            {"predicted_tp_bytes_per_step", predicted_tp_bytes(static_cast<double>(positions_) / steps)},
            {"predicted_bytes_sent_per_step", sent},
            {"dp_bytes_per_step", static_cast<double>(grid_.data().log().bytes("all_reduce", "tp data-parallel")) /
                                      std::max<int64_t>(measured_steps_ + 1, 1)}};
  }

  std::string describe() const override {
    const VocabShard& v = model_->vocab();
    return fmt::format("  grid        TP {} x DP {}: tensor groups of {} consecutive ranks (each holds 1/{} of every "
                       "large weight, {} of {} heads, vocabulary rows {}..{} of {} padded to {}), {} data-parallel "
                       "replica{}",
                       grid_.tp(), grid_.dp(), grid_.tp(), grid_.tp(), model_->config().n_head / grid_.tp(),
                       model_->config().n_head, v.start, v.end() - 1, v.vocab, v.padded, grid_.dp(),
                       grid_.dp() == 1 ? "" : "s") +
           fmt::format("\n  mesh        {}", grid_.mesh().layout().describe());
  }

 private:
  // Note [Bytes of a tensor-parallel step] for `positions` = B x T.
  double predicted_tp_bytes(double positions) const {
    const model::Gpt2Config& c = model_->config();
    return (4.0 * c.n_layer + 2) * positions * c.n_embd * 4 + 3 * positions * 4 + 8;
  }

  // param.<name> (and grad.<name>) of this rank's slices, under their Hugging Face names.
  io::TensorMap tensors(bool gradients) const {
    io::TensorMap out;
    for (const auto& p : model_->named_parameters()) {
      const std::string name = hf_name(p.key());
      out["param." + name] = p.value().detach().to(torch::kCPU).clone();
      if (gradients && p.value().grad().defined()) out["grad." + name] = p.value().grad().to(torch::kCPU).clone();
    }
    return out;
  }

  model::Gpt2LMHeadModel whole_;
  Grid grid_;
  TensorParallelGpt2 model_;
  std::optional<train::RankDumpPlan> dump_;
  int64_t tp_bytes_ = 0, positions_ = 0, measured_steps_ = 0;
  int64_t largest_tensor_bytes_ = 0, logits_slice_bytes_ = 0;  // rank 0's steps 2 on (the counting allocator)
  struct OpTally {
    int64_t count = 0, bytes = 0;
  };
  std::map<std::string, OpTally> tp_ops_;  // the tensor group's operations over the measured steps
};

}  // namespace

std::unique_ptr<lm::GridTrainer> make_tensor_parallel_trainer(model::Gpt2LMHeadModel whole, dist::Group& world,
                                                              const lm::LmOptions& options) {
  return std::make_unique<TensorParallelTrainer>(std::move(whole), world, options.tp);
}

}  // namespace dtlab::tp
