// The zero exercise's reference on thread ranks over Gloo (dist_test_util.h): the ring
// reduce-scatter and all-gather against the sums they must give, at worlds 2, 3 and 4, with the
// bytes each rank sends (N-1)/N of the buffer; ZeRO-1 through the kit's sharded step against one
// process on the union of the ranks' minibatches, over several steps, at worlds 2 and 3 with a
// parameter count that 3 does not divide.
#include <gtest/gtest.h>


#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dist_test_util.h"
#include "dtlab/shard/sharded_trainer.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/shard/flat_parameters.h"
#include "dtlab/shard/shard_optimizer.h"
#include "dtlab/shard/shard_step.h"
#include "dtlab/shard/unit_hooks.h"
#include "dtlab/tasks/zero.h"
#include "dtlab/train/optimizer.h"
#include "dtlab/train/step.h"
#include "tiny_model.h"

namespace zero_test {

// Rank r's buffer: values that differ per rank and per element, made without the global generator.
torch::Tensor buffer_of(int rank, int64_t numel) {
  return torch::arange(numel, torch::kFloat).mul(0.25).add(100.0 * (rank + 1)).sin();
}

class Ring : public ::testing::TestWithParam<int> {};

TEST_P(Ring, ReduceScatterLeavesEachRankTheSumOfItsPiece) {
  const int world = GetParam();
  const int64_t numel = 6 * world;
  torch::Tensor sum = torch::zeros({numel});
  for (int r = 0; r < world; ++r) sum += buffer_of(r, numel);
  dtlab::test::run_ranks(world, [&](dtlab::dist::Group& group) {
    torch::Tensor flat = buffer_of(group.rank(), numel);
    dtlab::zero::ring_reduce_scatter(flat, group, "test");
    const int64_t piece = numel / world;
    EXPECT_TRUE(torch::allclose(flat.narrow(0, group.rank() * piece, piece), sum.narrow(0, group.rank() * piece, piece),
                                1e-6, 1e-6));
    // (N-1) sends of one piece each: (N-1)/N of the buffer leaves every rank.
    EXPECT_EQ(group.log().bytes("send"), (world - 1) * piece * 4);
  });
}

TEST_P(Ring, AllGatherGivesEveryRankEveryOwnersPiece) {
  const int world = GetParam();
  const int64_t numel = 5 * world;
  dtlab::test::run_ranks(world, [&](dtlab::dist::Group& group) {
    const int64_t piece = numel / world;
    torch::Tensor flat = torch::full({numel}, -1.0f);
    flat.narrow(0, group.rank() * piece, piece).copy_(buffer_of(group.rank(), numel).narrow(0, group.rank() * piece, piece));
    dtlab::zero::ring_all_gather(flat, group, "test");
    for (int owner = 0; owner < world; ++owner) {
      EXPECT_TRUE(torch::equal(flat.narrow(0, owner * piece, piece), buffer_of(owner, numel).narrow(0, owner * piece, piece)))
          << "the piece of rank " << owner;
    }
    EXPECT_EQ(group.log().bytes("send"), (world - 1) * piece * 4);
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, Ring, ::testing::Values(2, 3, 4));

TEST(Ring, RefusesABufferThatDoesNotCut) {
  dtlab::test::run_ranks(2, [&](dtlab::dist::Group& group) {
    torch::Tensor flat = torch::zeros({7});
    EXPECT_THROW(dtlab::zero::ring_reduce_scatter(flat, group, "test"), dtlab::Error);
  });
}

// 65 parameters, which 2 and 3 do not divide (tiny_model.h).
using Tiny = dtlab::test::TinyModel;

std::shared_ptr<Tiny> tiny() {
  std::lock_guard<std::mutex> lock(dtlab::test::global_generator_mutex());
  torch::manual_seed(7);
  return std::make_shared<Tiny>();
}

constexpr int kSteps = 8;
constexpr int64_t kGlobalBatch = 6;

// Step s's global minibatch (inputs and targets), the same on every rank.
std::pair<torch::Tensor, torch::Tensor> global_batch(int step) {
  const torch::Tensor x = torch::arange(kGlobalBatch * 7, torch::kFloat).reshape({kGlobalBatch, 7}).mul(0.37 * step).sin();
  const torch::Tensor y = torch::arange(kGlobalBatch * 3, torch::kFloat).reshape({kGlobalBatch, 3}).mul(0.11 + step).cos();
  return {x, y};
}

dtlab::train::TrainState state_for(const std::shared_ptr<Tiny>& model, std::unique_ptr<torch::optim::AdamW> optimizer) {
  dtlab::train::TrainState state;
  state.module = model;
  state.optimizer = std::move(optimizer);
  state.scheduler = std::make_unique<dtlab::train::LinearWarmupSchedule>(*state.optimizer, 2, kSteps);
  state.max_grad_norm = 0.5;  // small enough to clip: the norm over the pieces is checked too
  return state;
}

const dtlab::train::OptimizerOptions kOptions{/*learning_rate=*/3e-2, /*weight_decay=*/0.1, /*adam_epsilon=*/1e-8};

// One process on the whole batch: the kit's own step.
std::vector<float> one_process_losses(std::shared_ptr<Tiny>& model) {
  dtlab::train::TrainState state = state_for(model, dtlab::train::make_adamw(*model, kOptions));
  std::vector<float> losses;
  for (int step = 1; step <= kSteps; ++step) {
    const auto [x, y] = global_batch(step);
    state.module->train();
    const torch::Tensor loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    dtlab::train::apply_update(state);
    losses.push_back(loss.item<float>());
  }
  return losses;
}

// The whole batch's gradient of step 1 before any update, end to end as a flat buffer lays it.
torch::Tensor one_process_first_gradient(int world) {
  auto model = tiny();
  const auto [x, y] = global_batch(1);
  torch::mse_loss(model->forward(x), y).backward();
  dtlab::shard::FlatParameters flat(*model, world);
  flat.flatten_gradients();
  return flat.gradients();
}

// A strategy as the step sees it, keeping what after_backward left in the shard gradients: AdamW
// hardly tells a gradient from N times it (m / sqrt(v)), and clipping hides it too, so a sum that
// is not averaged shows in the gradient itself, not in the losses.
class Recording final : public dtlab::shard::ShardStrategy {
 public:
  Recording(std::unique_ptr<dtlab::shard::ShardStrategy> inner, torch::Tensor shard_gradients)
      : inner_(std::move(inner)), shard_gradients_(std::move(shard_gradients)) {}
  void before_backward() override { inner_->before_backward(); }
  void after_backward() override {
    inner_->after_backward();
    if (!first_.defined()) first_ = shard_gradients_.clone();
  }
  void after_update() override { inner_->after_update(); }
  const torch::Tensor& first() const { return first_; }

 private:
  std::unique_ptr<dtlab::shard::ShardStrategy> inner_;
  torch::Tensor shard_gradients_, first_;
};

// ZeRO-1 on `world` thread ranks against one process; the model in one unit or in units of its
// modules (fc, norm, out: Note [Shard units]).
using MakeStrategy = std::function<std::unique_ptr<dtlab::shard::ShardStrategy>(const dtlab::shard::ShardContext&)>;

// The most gradient bytes a rank held (the kit's meter), per rank.
void train_and_compare(int world, const dtlab::shard::UnitOf& unit_of, size_t units_expected, const MakeStrategy& make,
                       std::vector<int64_t>* peak_gradient_bytes = nullptr) {
  auto reference = tiny();
  const std::vector<float> expected = one_process_losses(reference);
  const torch::Tensor first_gradient = one_process_first_gradient(world);
  dtlab::test::run_ranks(world, [&](dtlab::dist::Group& group) {
    auto model = tiny();
    std::vector<dtlab::shard::ShardUnit> units = dtlab::shard::make_units(*model, world, group.rank(), unit_of);
    ASSERT_EQ(units.size(), units_expected);
    dtlab::shard::FlatParameters& flat = *units[0].flat;
    dtlab::train::TrainState state = state_for(model, dtlab::shard::make_shard_adamw(units, group.rank(), kOptions));
    const dtlab::shard::ShardContext context{&units, &group, {}};
    dtlab::shard::UnitGradientHooks meter(units, nullptr);  // before the strategy's hooks, as the kit's driver
    Recording strategy(make(context), units[0].shard_gradients);
    const int64_t rows = kGlobalBatch / world;
    torch::Tensor x, y;
    state.loss = [&](const dtlab::data::Batch&) { return torch::mse_loss(model->forward(x), y); };
    const dtlab::train::StepFunction step = dtlab::shard::sharded_step(strategy, context, &meter);
    for (int s = 1; s <= kSteps; ++s) {
      const auto whole = global_batch(s);
      x = whole.first.narrow(0, group.rank() * rows, rows);
      y = whole.second.narrow(0, group.rank() * rows, rows);
      dtlab::data::Batch batch;
      dtlab::train::StepInput input;
      input.step = s;
      input.batch = &batch;
      const dtlab::train::StepResult result = step(state, input);
      // Each rank's loss is its half's mean; their mean is the whole batch's (equal shares).
      torch::Tensor loss = torch::tensor({result.loss});
      group.all_reduce(loss, dtlab::dist::ReduceOp::AVG_BY_DIVISION, "loss");
      EXPECT_NEAR(loss.item<float>(), expected[s - 1], 1e-5 * (1 + std::abs(expected[s - 1]))) << "step " << s;
    }
    // This rank's piece of the averaged gradient, before clipping (one unit: the model's buffer).
    if (units_expected == 1) {
      EXPECT_TRUE(torch::allclose(strategy.first(), flat.shard(first_gradient, group.rank()), 1e-5, 1e-6))
        << "rank " << group.rank() << ": the piece of the gradient after after_backward is not the whole batch's"
        << " (max difference " << (strategy.first() - flat.shard(first_gradient, group.rank())).abs().max().item<float>()
        << ")";
    }
    const auto theirs = reference->named_parameters();
    for (const auto& item : model->named_parameters()) {
      EXPECT_TRUE(torch::allclose(item.value(), theirs[item.key()], 1e-4, 1e-5)) << item.key();
    }
    // The moments of 1/N of the model: at most one piece of each unit.
    int64_t pieces = 0;
    for (const auto& unit : units) pieces += unit.flat->layout().shard_numel();
    EXPECT_LE(dtlab::shard::optimizer_state_bytes(*state.optimizer), 8 * pieces);
    EXPECT_GT(dtlab::shard::optimizer_state_bytes(*state.optimizer), 0);
    if (peak_gradient_bytes) (*peak_gradient_bytes)[group.rank()] = meter.peak_gradient_bytes();
  });
}

class Zero1 : public ::testing::TestWithParam<int> {};

std::string by_module(const std::string& name) { return name.substr(0, name.find('.')); }  // fc, norm, out

TEST_P(Zero1, TrainsAsOneProcessOnTheWholeBatch) {
  train_and_compare(GetParam(), dtlab::shard::whole_model, 1, dtlab::zero::make_zero1);
}

TEST_P(Zero1, TrainsAsOneProcessInUnits) {
  const int world = GetParam();
  std::vector<int64_t> peaks(world);
  train_and_compare(world, by_module, 3, dtlab::zero::make_zero1, &peaks);
  // The whole gradient at once (65 floats), and the flat copies beside it.
  for (int r = 0; r < world; ++r) EXPECT_GE(peaks[r], 65 * 4) << "rank " << r;
}

// ZeRO-2: each unit's gradient reduced and freed as backward finishes it; the most a rank holds
// is the largest unit's (fc: 40 floats), never the model's 65.
TEST_P(Zero1, Zero2TrainsAsOneProcessHoldingOneUnitsGradient) {
  const int world = GetParam();
  std::vector<int64_t> peaks(world);
  train_and_compare(world, by_module, 3, dtlab::zero::make_zero2, &peaks);
  for (int r = 0; r < world; ++r) {
    EXPECT_LT(peaks[r], 65 * 4) << "rank " << r;
    EXPECT_GE(peaks[r], 40 * 4) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, Zero1, ::testing::Values(2, 3));

// GPT-2 (3 blocks, tied head, vocabulary 41 so that no unit divides by 2 or 3 evenly) through the kit's
// ShardedTrainer at every stage (and the replicated baseline, stage 0), against one process on the whole batch: the losses of 6 steps
// and every weight after them (FSDP: gathered whole first, as for a checkpoint); and what a rank
// held: the optimiser's moments of its pieces only, ZeRO-2 and FSDP never the whole gradient, FSDP
// never every parameter.
dtlab::model::Gpt2Config small_gpt2() {
  dtlab::model::Gpt2Config c;
  c.vocab_size = 41;
  c.n_positions = 16;
  c.n_embd = 16;
  c.n_layer = 3;
  c.n_head = 2;
  dtlab::model::Gpt2Overrides::dropout(0.0).apply(c);
  return c;
}

dtlab::model::Gpt2LMHeadModel gpt2() {
  std::lock_guard<std::mutex> lock(dtlab::test::global_generator_mutex());
  torch::manual_seed(3);
  return dtlab::model::Gpt2LMHeadModel(small_gpt2());
}

torch::Tensor token_batch(int step) {  // [6, 10], the same on every rank
  return torch::arange(60, torch::kInt64).reshape({6, 10}).mul(7 + step).remainder(41);
}

constexpr int kGpt2Steps = 6;

dtlab::train::TrainState gpt2_state(dtlab::model::Gpt2LMHeadModel model, std::unique_ptr<torch::optim::AdamW> optimizer) {
  dtlab::train::TrainState state;
  state.module = model.ptr();
  state.optimizer = std::move(optimizer);
  state.scheduler = std::make_unique<dtlab::train::LinearWarmupSchedule>(*state.optimizer, 1, kGpt2Steps);
  state.max_grad_norm = 1.0;
  return state;
}

dtlab::shard::MakeShardStrategy the_reference() {
  return [](int stage, const dtlab::shard::ShardContext& c) {
    if (stage == 1) return dtlab::zero::make_zero1(c);
    return stage == 2 ? dtlab::zero::make_zero2(c) : dtlab::zero::make_fsdp(c);
  };
}

class Gpt2Stages : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(Gpt2Stages, TrainAsOneProcess) {
  // Plain copies, not the structured binding itself: C++17 does not let a lambda capture one.
  const int stage = std::get<0>(GetParam()), world = std::get<1>(GetParam());
  auto reference = gpt2();
  dtlab::train::TrainState one = gpt2_state(reference, dtlab::train::make_adamw(*reference, kOptions));
  std::vector<float> expected;
  int64_t whole_gradient_bytes = 0;
  for (int s = 1; s <= kGpt2Steps; ++s) {
    const torch::Tensor ids = token_batch(s);
    const torch::Tensor loss = dtlab::model::lm_loss(reference->forward(ids).logits, ids);
    loss.backward();
    if (s == 1) {
      for (const auto& p : reference->parameters()) whole_gradient_bytes += p.grad().numel() * 4;
    }
    dtlab::train::apply_update(one);
    expected.push_back(loss.item<float>());
  }
  dtlab::test::run_ranks(world, [&](dtlab::dist::Group& group) {
    auto model = gpt2();
    dtlab::shard::ShardedTrainer trainer(model, group, stage, the_reference());
    dtlab::train::TrainState state = gpt2_state(model, trainer.make_optimizer(kOptions));
    const int64_t rows = 6 / world;
    torch::Tensor ids;
    state.loss = [&](const dtlab::data::Batch&) { return dtlab::model::lm_loss(model->forward(ids).logits, ids); };
    const dtlab::train::StepFunction step = trainer.step();
    for (int s = 1; s <= kGpt2Steps; ++s) {
      ids = token_batch(s).narrow(0, group.rank() * rows, rows);
      dtlab::data::Batch batch;
      dtlab::train::StepInput input;
      input.step = s;
      input.batch = &batch;
      torch::Tensor loss = torch::tensor({step(state, input).loss});
      // Every row holds the same number of target tokens: the mean of the ranks' means is the batch's.
      group.all_reduce(loss, dtlab::dist::ReduceOp::AVG_BY_DIVISION, "loss");
      EXPECT_NEAR(loss.item<float>(), expected[s - 1], 2e-5 * (1 + std::abs(expected[s - 1]))) << "step " << s;
    }
    const nlohmann::json held = trainer.summary(*state.optimizer, "test");
    trainer.gather_whole();
    const auto theirs = reference->named_parameters();
    for (const auto& item : model->named_parameters()) {
      torch::Tensor mine = item.value(), want = theirs[item.key()];
      if (item.key().find("c_attn.bias") != std::string::npos) {
        // The key's bias adds q . b_k to every score of a row alike, which softmax cancels: its
        // gradient is zero but for rounding, and AdamW (m / sqrt(v)) moves it by about the learning
        // rate in the direction of that rounding, which the order of a sum decides. Compared
        // without the key's third.
        const int64_t n = small_gpt2().n_embd;
        mine = torch::cat({mine.narrow(0, 0, n), mine.narrow(0, 2 * n, n)});
        want = torch::cat({want.narrow(0, 0, n), want.narrow(0, 2 * n, n)});
      }
      EXPECT_TRUE(torch::allclose(mine, want, 1e-4, 1e-5))
          << item.key() << ": max difference " << (mine - want).abs().max().item<float>();
    }
    // Note [A gather that puts pieces in the wrong place]: the reference's gathers hold every
    // owner's piece in its slot.
    EXPECT_EQ(held.at("gather_finding"), "") << held.dump();
    const int64_t elements = held.at("shard_elements").get<int64_t>();
    EXPECT_EQ(held.at("optimizer_state_bytes").get<int64_t>() > 8 * elements, false) << held.dump();
    const int64_t peak_gradient = held.at("peak_gradient_bytes").get<int64_t>();
    const int64_t peak_parameters = held.at("peak_parameter_bytes").get<int64_t>();
    if (stage == 0) {
      // Note [The replicated baseline]: everything whole on every rank, the replicas equal.
      EXPECT_EQ(held.at("optimizer_state_bytes").get<int64_t>(), 8 * elements) << held.dump();
      EXPECT_EQ(4 * elements, held.at("whole_bytes").get<int64_t>()) << held.dump();
      for (const auto& sum : held.at("replica_checksums")) EXPECT_EQ(sum, held.at("replica_checksums")[0]) << held.dump();
      EXPECT_EQ(held.at("bytes_sent_per_step").get<double>(), 0.0) << "c10d's all_reduce, not a ring of sends";
      EXPECT_GE(held.at("all_reduced_bytes_per_step").get<double>(), 4.0 * static_cast<double>(elements));
    }
    if (stage <= 1) {
      EXPECT_GE(peak_gradient, whole_gradient_bytes) << held.dump();
    } else {
      EXPECT_LT(peak_gradient, whole_gradient_bytes) << held.dump();
    }
    if (stage == 3) {
      EXPECT_LT(peak_parameters, whole_gradient_bytes) << held.dump();  // a gradient is a parameter's size
      EXPECT_GT(peak_parameters, 0) << held.dump();
    }
  });
}

INSTANTIATE_TEST_SUITE_P(StagesAndWorlds, Gpt2Stages,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3), ::testing::Values(2, 3)));

// Note [A gather that puts pieces in the wrong place]: the reference FSDP, but each rank's first
// gather of a step leaves the slot of the next rank zeroed, as a gather that writes a received
// piece elsewhere would: step 1's forward names the unit and the slot, on every rank, and the
// run's own loss error says it too.
class ZeroedSlotFsdp final : public dtlab::shard::ShardStrategy {
 public:
  explicit ZeroedSlotFsdp(const dtlab::shard::ShardContext& c) : c_(c), fsdp_(dtlab::zero::make_fsdp(c)) {}
  void before_backward() override { fsdp_->before_backward(); }
  void after_backward() override { fsdp_->after_backward(); }
  void after_update() override { fsdp_->after_update(); }
  void before_stage(int64_t stage) override {
    fsdp_->before_stage(stage);
    if (stage != 0) return;
    torch::NoGradGuard no_grad;
    dtlab::shard::ShardUnit& unit = (*c_.units)[c_.stage_units[0][0]];
    const int next = (c_.group->rank() + 1) % c_.group->size();
    unit.flat->shard(unit.flat->values(), next).zero_();
  }
  void after_stage(int64_t stage, const torch::Tensor& output) override { fsdp_->after_stage(stage, output); }

 private:
  dtlab::shard::ShardContext c_;
  std::unique_ptr<dtlab::shard::ShardStrategy> fsdp_;
};

TEST(Gpt2Stages, AGatherThatLeavesASlotWrongIsNamed) {
  dtlab::test::run_ranks(3, [&](dtlab::dist::Group& group) {
    auto model = gpt2();
    dtlab::shard::ShardedTrainer trainer(model, group, 3, [](int, const dtlab::shard::ShardContext& c) {
      return std::make_unique<ZeroedSlotFsdp>(c);
    });
    dtlab::train::TrainState state = gpt2_state(model, trainer.make_optimizer(kOptions));
    const torch::Tensor ids = token_batch(1).narrow(0, group.rank() * 2, 2);
    state.loss = [&](const dtlab::data::Batch&) { return dtlab::model::lm_loss(model->forward(ids).logits, ids); };
    dtlab::data::Batch batch;
    dtlab::train::StepInput input;
    input.step = 1;
    input.batch = &batch;
    trainer.step()(state, input);
    const int next = (group.rank() + 1) % 3;
    EXPECT_NE(trainer.gather_finding().find("slot " + std::to_string(next) + " of the gathered unit embeddings is not "
                                            "rank " + std::to_string(next) + "'s piece (1-norm 0,"),
              std::string::npos)
        << trainer.gather_finding();
    EXPECT_EQ(trainer.summary(*state.optimizer, "test").at("gather_finding"), trainer.gather_finding());
  });
}

}  // namespace zero_test
