// The precision exercise's trainer, see precision/precision_trainer.h and the step in dtlab/tasks/precision.h.
#include "dtlab/precision/precision_trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/nn/functional/loss.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/dist/all_reduce_tensors.h"
#include "dtlab/dist/every_rank.h"
#include "dtlab/report/tensor_bytes.h"
#include "dtlab/tasks/precision.h"
#include "dtlab/train/rank_dump.h"
#include "dtlab/train/step.h"

namespace dtlab::precision {
namespace {

enum class Precision { kFp32, kBf16, kFp16 };

Precision parse_precision(const std::string& p) {
  if (p == "fp32") return Precision::kFp32;
  if (p == "bf16") return Precision::kBf16;
  if (p == "fp16") return Precision::kFp16;
  throw Error("--precision " + p + ": expected fp32, bf16 or fp16");
}

// --inject_inf STEP:RANK; {-1, -1} when not given.
std::pair<int64_t, int> parse_injection(const std::string& flag, int world) {
  if (flag.empty()) return {-1, -1};
  const size_t colon = flag.find(':');
  try {
    if (colon == std::string::npos) throw std::invalid_argument(flag);
    const int64_t step = std::stoll(flag.substr(0, colon));
    const int rank = std::stoi(flag.substr(colon + 1));
    if (step < 1 || rank < 0 || rank >= world) throw std::out_of_range(flag);
    return {step, rank};
  } catch (const std::exception&) {
    throw Error(fmt::format("--inject_inf {}: expected STEP:RANK, a step from 1 and a rank below the world size {}",
                            flag, world));
  }
}

// The process's random generator, whose state a checkpointed block keeps: its bytes are part of
// what such a block may hold (Note [What a block keeps]).
int64_t generator_state_bytes() {
  at::Generator g = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.get_state().nbytes();
}

// A GPT-2 like `whole`, in bf16, drawn without moving the process's generator (its weights are
// overwritten by the masters before every step).
model::Gpt2LMHeadModel bf16_copy(const model::Gpt2LMHeadModel& whole) {
  at::Generator g = at::detail::getDefaultCPUGenerator();
  torch::Tensor state;
  {
    std::lock_guard<std::mutex> lock(g.mutex());
    state = g.get_state();
  }
  model::Gpt2LMHeadModel copy(whole->config());
  {
    std::lock_guard<std::mutex> lock(g.mutex());
    g.set_state(state);
  }
  copy->to(torch::kBFloat16);
  copy->train();
  return copy;
}

int64_t bytes_now() {
  const report::TensorBytes* meter = report::TensorBytes::installed();
  return meter ? meter->current() : 0;
}

// The share of the elements of `values` that are already bf16 numbers: 1 for masters kept in
// bf16, about 2^-16 for fp32 weights that training has moved.
double bf16_exact_fraction(const std::vector<torch::Tensor>& values) {
  int64_t exact = 0, all = 0;
  for (const torch::Tensor& v : values) {
    exact += v.eq(v.to(torch::kBFloat16).to(v.scalar_type())).sum().item<int64_t>();
    all += v.numel();
  }
  return all ? static_cast<double>(exact) / static_cast<double>(all) : 0;
}

class PrecisionTrainer : public lm::GridTrainer {
 public:
  PrecisionTrainer(model::Gpt2LMHeadModel whole, dist::Group& world, const lm::LmOptions& o)
      : whole_(whole),
        world_(world),
        precision_(parse_precision(o.precision)),
        every_(o.recompute_every),
        micro_batches_(o.micro_batches),
        rng_bytes_(generator_state_bytes()) {
    if (o.loss_scale != "dynamic" && o.loss_scale != "none") {
      throw Error("--loss_scale " + o.loss_scale + ": expected dynamic or none");
    }
    const auto [step, rank] = parse_injection(o.inject_inf, world.size());
    inject_step_ = step;
    inject_rank_ = rank;
    if (inject_step_ > 0 && precision_ != Precision::kFp16) {
      throw Error("--inject_inf puts an inf into the fp16 gradients: it needs --precision fp16");
    }
    if (precision_ == Precision::kFp16 && o.loss_scale == "dynamic") {
      LossScalerOptions so;
      so.initial_scale = o.loss_scale_init;
      so.growth_interval = o.scale_growth_interval;
      scaler_.emplace(so);
      growth_interval_ = o.scale_growth_interval;
    }
    compute_ = precision_ == Precision::kBf16 ? bf16_copy(whole_) : whole_;
    masters_ = whole_->parameters();
    compute_params_ = compute_->parameters();
    const int64_t layers = whole_->config().n_layer;
    blocks_.reserve(layers);
    forwards_.assign(layers, 0);
    kept_.assign(layers, 0);
    forwards_measured_.assign(layers, 0);
    excess_.assign(layers, 0);
    for (int64_t i = 0; i < layers; ++i) {
      model::Gpt2Block block = compute_->transformer->block(i);
      blocks_.push_back([this, block, i](const torch::Tensor& h) mutable {
        ++forwards_[i];
        return block->forward(h, torch::Tensor());
      });
      checkpointed_.push_back(is_checkpointed(i, every_));
    }
  }

  int replicas() const override { return world_.size(); }
  int replica() const override { return world_.rank(); }
  int ranks_per_replica() const override { return 1; }
  std::shared_ptr<torch::nn::Module> module() override { return whole_.ptr(); }
  void dump_at(train::RankDumpPlan plan) override { dump_ = std::move(plan); }
  std::string section() const override { return "memory_precision"; }
  void gather_model() override {}  // every rank holds the masters, kept equal by the all-reduce

  train::StepResult step(train::TrainState& state, const train::StepInput& input) override {
    const bool dump = dump_ && input.step == dump_->step;
    if (dump) train::write_rank_dump(*dump_, train::DumpPoint::kBeforeStep, *whole_, *input.rows);
    whole_->train();
    compute_->train();
    measuring_ = input.step >= 2;  // step 1 allocates what every later step reuses
    const double comm_before = world_.log().seconds("all_reduce");
    report::TensorBytes* meter = report::TensorBytes::installed();
    if (meter) meter->reset_peak();
    if (precision_ == Precision::kBf16) {
      refresh_compute_weights(masters_, compute_params_);
      // Whether the masters are still fp32 numbers once the student's code has run: after the
      // update they would move off bf16's grid again, wherever AdamW moves them.
      if (measuring_) masters_bf16_fraction_ = std::max(masters_bf16_fraction_, bf16_exact_fraction(masters_));
    }

    // Note [The loss of a data-parallel step]: N first, then the micro-batches.
    const data::Batch& b = *input.batch;
    torch::Tensor n = b.label_weights.sum().to(torch::kFloat64).reshape({1});
    world_.all_reduce(n, dist::ReduceOp::SUM, "target tokens");
    const double tokens = std::max(1.0, n.item<double>());
    const double scale = scaler_ ? scaler_->scale() : 1.0;
    const int64_t rows = b.input_ids.size(0);
    const int64_t parts = std::min<int64_t>(micro_batches_, rows);
    double loss_sum = 0;
    const std::vector<int64_t> forwards_before = forwards_;  // a checkpointed block's second runs in backward
    for (int64_t m = 0; m < parts; ++m) {
      const int64_t from = rows * m / parts, to = rows * (m + 1) / parts;
      const torch::Tensor ids = b.input_ids.slice(0, from, to);
      const torch::Tensor labels = b.labels.slice(0, from, to);
      const torch::Tensor weights = b.label_weights.slice(0, from, to);
      const int64_t before = bytes_now();
      torch::Tensor loss = micro_batch_loss(ids, labels, weights, tokens);
      if (measuring_) forward_kept_ = std::max(forward_kept_, bytes_now() - before);
      loss_sum += loss.item<double>();
      if (precision_ == Precision::kFp16) loss = loss * scale;
      loss.backward();
      if (precision_ == Precision::kBf16) accumulate_master_gradients(compute_params_, masters_);
    }
    if (measuring_) {
      microbatches_measured_ += parts;
      for (size_t i = 0; i < forwards_.size(); ++i) forwards_measured_[i] += forwards_[i] - forwards_before[i];
    }

    bool skipped = false;
    if (precision_ == Precision::kFp16) {
      skipped = fp16_gradients(input.step, scale);
    } else {
      sum_gradients();
    }
    if (dump) train::write_rank_dump(*dump_, train::DumpPoint::kAfterSync, *whole_, *input.rows);
    if (skipped) {
      whole_->zero_grad(/*set_to_none=*/true);  // no update, no step of the schedule
    } else {
      train::apply_update(state);
    }
    if (meter && measuring_) step_peak_ = std::max(step_peak_, meter->peak());
    if (measuring_) ++steps_measured_;
    torch::Tensor global = torch::full({1}, loss_sum, torch::kFloat64);
    world_.all_reduce(global, dist::ReduceOp::SUM, "precision loss");
    return train::StepResult{static_cast<float>(global.item<double>()),
                             world_.log().seconds("all_reduce") - comm_before};
  }

  nlohmann::json summary() override {
    const int64_t layers = static_cast<int64_t>(blocks_.size());
    // One row per rank: the block figures, then the run's, then the scaler's per step.
    std::vector<double> mine;
    const double micro = std::max<int64_t>(microbatches_measured_, 1);
    for (int64_t i = 0; i < layers; ++i) mine.push_back(static_cast<double>(forwards_measured_[i]) / micro);
    for (int64_t i = 0; i < layers; ++i) mine.push_back(static_cast<double>(kept_[i]));
    for (int64_t i = 0; i < layers; ++i) mine.push_back(static_cast<double>(excess_[i]));
    mine.push_back(static_cast<double>(forward_kept_));
    mine.push_back(static_cast<double>(step_peak_));
    mine.push_back(masters_bf16_fraction_);
    const size_t fixed = mine.size();
    for (const StepRecord& r : records_) {
      mine.insert(mine.end(), {r.scale, r.overflow ? 1.0 : 0.0, r.skipped ? 1.0 : 0.0, r.flushed, r.flushed_unscaled});
    }
    const std::vector<std::vector<double>> rows = dist::every_rank(world_, mine, "precision summary");
    auto per_rank = [&](size_t at) {
      std::vector<double> v;
      for (const std::vector<double>& r : rows) v.push_back(r[at]);
      return v;
    };
    auto per_rank_blocks = [&](size_t first) {
      std::vector<std::vector<double>> v;
      for (const std::vector<double>& r : rows) {
        v.emplace_back(r.begin() + static_cast<std::ptrdiff_t>(first),
                       r.begin() + static_cast<std::ptrdiff_t>(first + static_cast<size_t>(layers)));
      }
      return v;
    };
    const model::Gpt2Config& c = whole_->config();
    std::vector<int64_t> checkpointed;
    for (int64_t i = 0; i < layers; ++i) {
      if (checkpointed_[i]) checkpointed.push_back(i);
    }
    nlohmann::json s = {
        {"precision", precision_ == Precision::kFp32 ? "fp32" : precision_ == Precision::kBf16 ? "bf16" : "fp16"},
        {"recompute_every", every_},
        {"checkpointed_blocks", checkpointed},
        {"micro_batches", micro_batches_},
        {"n_layer", c.n_layer},
        {"n_embd", c.n_embd},
        {"measured_steps", steps_measured_},
        {"generator_state_bytes", rng_bytes_},
        {"block_forwards_per_micro_batch", per_rank_blocks(0)},
        {"block_kept_bytes", per_rank_blocks(layers)},
        {"block_kept_over_checkpoint_bytes", per_rank_blocks(2 * layers)},
        {"forward_kept_bytes", per_rank(3 * layers)},
        {"step_peak_tensor_bytes", per_rank(3 * layers + 1)},
        {"masters_dtype", "float32"},
        {"masters_bf16_exact_fraction", per_rank(3 * layers + 2)},
    };
    if (precision_ == Precision::kFp16) {
      nlohmann::json steps = nlohmann::json::array();
      for (size_t k = 0; k < records_.size(); ++k) {
        const size_t at = fixed + 5 * k;
        steps.push_back({{"step", static_cast<int64_t>(k) + 1},
                         {"scale", per_rank(at)},
                         {"overflow", per_rank(at + 1)},
                         {"skipped", per_rank(at + 2)},
                         {"flushed_fraction", per_rank(at + 3)},
                         {"flushed_fraction_unscaled", per_rank(at + 4)}});
      }
      s["loss_scale"] = scaler_ ? "dynamic" : "none";
      if (scaler_) s["scale_growth_interval"] = growth_interval_;
      if (inject_step_ > 0) s["inject_inf"] = {{"step", inject_step_}, {"rank", inject_rank_}};
      s["fp16_steps"] = steps;
    }
    return s;
  }

  std::string describe() const override {
    std::string blocks;
    for (size_t i = 0; i < checkpointed_.size(); ++i) {
      if (checkpointed_[i]) blocks += (blocks.empty() ? "" : ", ") + std::to_string(i);
    }
    std::string line = fmt::format(
        "  memory      {} data-parallel rank{}, {} micro-batch{} a step; checkpointed blocks: {}", world_.size(),
        world_.size() == 1 ? "" : "s", micro_batches_, micro_batches_ == 1 ? "" : "es",
        blocks.empty() ? "none" : blocks);
    switch (precision_) {
      case Precision::kFp32:
        return line + "\n  precision   fp32";
      case Precision::kBf16:
        return line + "\n  precision   bf16 forward and backward on a compute copy; fp32 masters, gradients and AdamW";
      case Precision::kFp16:
        break;
    }
    return line + fmt::format(
                      "\n  precision   fp32 compute; gradients all-reduced in fp16, {}",
                      scaler_ ? fmt::format("the loss scaled from {} (x2 after {} good steps, x0.5 on an overflow)",
                                            scaler_->scale(), growth_interval_)
                              : std::string("unscaled (--loss_scale none)"));
  }

 private:
  struct StepRecord {
    double scale = 1;
    bool overflow = false;  // the kit's own look at this rank's fp16 gradients (Note [Scaler's truth])
    bool skipped = false;   // what the scaler decided
    double flushed = 0, flushed_unscaled = 0;
  };

  // Note [The loss of a data-parallel step]; Note [What a block keeps].
  torch::Tensor micro_batch_loss(const torch::Tensor& ids, const torch::Tensor& labels, const torch::Tensor& weights,
                                 double tokens) {
    torch::Tensor h = compute_->forward_stage(0, ids);
    for (size_t i = 0; i < blocks_.size(); ++i) {
      const int64_t before = bytes_now();
      h = checkpointed_[i] ? CheckpointedBlock::apply(&blocks_[i], h) : blocks_[i](h);
      if (!measuring_) continue;
      const int64_t kept = bytes_now() - before;
      kept_[i] = std::max(kept_[i], kept);
      excess_[i] = std::max(excess_[i], kept - static_cast<int64_t>(h.nbytes()) - rng_bytes_);
    }
    const torch::Tensor logits = compute_->head(h).to(torch::kFloat32);
    namespace F = torch::nn::functional;
    const torch::Tensor ce = F::cross_entropy(logits.reshape({-1, logits.size(-1)}), labels.reshape(-1),
                                              F::CrossEntropyFuncOptions().reduction(torch::kNone));
    return (ce * weights.reshape(-1).to(torch::kFloat32)).sum() / tokens;
  }

  // fp32 and bf16: the masters' gradients summed over the ranks, in one all-reduce.
  void sum_gradients() {
    if (world_.size() == 1) return;
    std::vector<torch::Tensor> grads = master_gradients();
    dist::all_reduce_tensors(grads, world_, dist::ReduceOp::SUM, "precision gradients");
  }

  std::vector<torch::Tensor> master_gradients() {
    std::vector<torch::Tensor> grads;
    for (const torch::Tensor& p : masters_) {
      if (!p.grad().defined()) {
        throw Error(std::string("a master weight has no gradient after the step's backward, though every parameter "
                                "takes part in every forward") +
                    (precision_ == Precision::kBf16 ? ": does accumulate_master_gradients give every master the "
                                                      "gradient of its compute copy?"
                                                    : ": does CheckpointedBlock::backward backpropagate through the "
                                                      "recomputed block, so that its parameters get gradients?"));
      }
      grads.push_back(p.grad());
    }
    return grads;
  }

  // The fp16 wire and the scaler (dtlab/tasks/precision.h); whether the step is skipped.
  bool fp16_gradients(int64_t step, double scale) {
    torch::NoGradGuard no_grad;
    const std::vector<torch::Tensor> grads = master_gradients();
    std::vector<torch::Tensor> half;
    StepRecord record;
    record.scale = scale;
    int64_t nonzero = 0, flushed = 0, flushed_unscaled = 0;
    // Note [An fp16 sum that cannot overflow]: each rank's gradient is its part of the global
    // batch's (Note [The loss of a data-parallel step]), so the sum of the parts is the whole. Two
    // finite fp16 parts can still sum past 65504, after every rank has found its own finite: so
    // each part goes on the wire divided by the world size, as PyTorch DDP's fp16 compression hook
    // sends it, and the sum of W parts of at most 65504 / W each is finite; the kit multiplies the
    // unscaled sum back by W. (A check after the sum would catch it too, at the price of a skipped
    // step; the scale that overflowed the sum at 2 ranks, 65536, trains here.)
    const double world = static_cast<double>(world_.size());
    for (const torch::Tensor& g : grads) {
      const torch::Tensor part = g / world;
      half.push_back(part.to(torch::kHalf));
      const torch::Tensor nz = part.ne(0);
      nonzero += nz.sum().item<int64_t>();
      flushed += (nz & half.back().eq(0)).sum().item<int64_t>();
      flushed_unscaled += (nz & (part / scale).to(torch::kHalf).eq(0)).sum().item<int64_t>();
    }
    record.flushed = nonzero ? static_cast<double>(flushed) / static_cast<double>(nonzero) : 0;
    record.flushed_unscaled = nonzero ? static_cast<double>(flushed_unscaled) / static_cast<double>(nonzero) : 0;
    if (step == inject_step_ && world_.rank() == inject_rank_) {
      half.front().view(-1)[0].fill_(std::numeric_limits<float>::infinity());
    }
    for (const torch::Tensor& h : half) record.overflow = record.overflow || !torch::isfinite(h).all().item<bool>();
    bool skip = false;
    if (scaler_) {
      skip = scaler_->found_overflow(half, world_);
      check_agreement(step, skip);
    }
    record.skipped = skip;
    if (!skip) {
      if (world_.size() > 1) dist::all_reduce_tensors(half, world_, dist::ReduceOp::SUM, "precision fp16 gradients");
      if (scaler_) {
        scaler_->unscale(half, masters_);
      } else {
        for (size_t i = 0; i < half.size(); ++i) masters_[i].mutable_grad().copy_(half[i]);
      }
      // Note [An fp16 sum that cannot overflow]: the parts went divided by the world size.
      if (world > 1) {
        for (const torch::Tensor& m : masters_) m.mutable_grad().mul_(world);
      }
    }
    if (scaler_) scaler_->update(skip);
    records_.push_back(record);
    return skip;
  }

  // Note [Scaler's truth]: every rank's decision, gathered; an error on every rank when they differ.
  void check_agreement(int64_t step, bool skip) {
    if (world_.size() == 1) return;
    const std::vector<std::vector<double>> all = dist::every_rank(world_, {skip ? 1.0 : 0.0}, "scaler decisions");
    std::string skipping, stepping;
    for (size_t r = 0; r < all.size(); ++r) {
      std::string& to = all[r][0] > 0 ? skipping : stepping;
      to += (to.empty() ? "" : ", ") + std::to_string(r);
    }
    if (!skipping.empty() && !stepping.empty()) {
      throw Error(fmt::format("step {}: found_overflow returned true on rank {} and false on rank {}: every rank must "
                              "decide the same (agree over the group), or the ranks that step wait for the others in "
                              "the gradients' all-reduce",
                              step, skipping, stepping));
    }
  }

  model::Gpt2LMHeadModel whole_;
  dist::Group& world_;
  Precision precision_;
  int64_t every_;
  int64_t micro_batches_;
  int64_t rng_bytes_;
  int64_t inject_step_ = -1;
  int inject_rank_ = -1;
  int64_t growth_interval_ = 0;
  std::optional<DynamicLossScaler> scaler_;
  model::Gpt2LMHeadModel compute_{nullptr};
  std::vector<torch::Tensor> masters_, compute_params_;
  std::vector<BlockForward> blocks_;
  std::vector<bool> checkpointed_;
  std::vector<int64_t> forwards_, forwards_measured_, kept_, excess_;
  std::vector<StepRecord> records_;
  std::optional<train::RankDumpPlan> dump_;
  bool measuring_ = false;
  double masters_bf16_fraction_ = 0;  // the most, after refresh_compute_weights (bf16)
  int64_t microbatches_measured_ = 0, steps_measured_ = 0, forward_kept_ = 0, step_peak_ = 0;
};

}  // namespace

std::unique_ptr<lm::GridTrainer> make_precision_trainer(model::Gpt2LMHeadModel whole, dist::Group& world,
                                                     const lm::LmOptions& options) {
  return std::make_unique<PrecisionTrainer>(std::move(whole), world, options);
}

}  // namespace dtlab::precision
