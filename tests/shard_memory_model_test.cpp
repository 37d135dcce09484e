// The memory model of sharding (shard/memory_model.h) against the kit: GPT-2's units against the
// kit's model, the figures docs/MEASUREMENTS.md measured, the zero reference (solutions/zero
// through shard::ShardedTrainer, on thread ranks) at every stage at worlds 2 and 3 on a GPT-2 of
// 2,422 parameters (3 does not divide it; its embeddings and blocks are padded at 2 and 3), and
// the table of handouts/zero.md, so that it cannot drift.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "dist_test_util.h"
#include "dtlab/core/error.h"
#include "dtlab/io/file.h"
#include "dtlab/shard/sharded_trainer.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/shard/memory_model.h"
#include "dtlab/shard/shard_optimizer.h"
#include "dtlab/shard/units.h"
#include "dtlab/tasks/zero.h"
#include "dtlab/train/optimizer.h"
#include "dtlab/train/step.h"
#include "test_util.h"

namespace shard_memory_model_test {

using dtlab::shard::RankMemory;
using dtlab::shard::Stage;

// A GPT-2 whose units no world of 2 or 3 divides but the head at 2: embeddings (41 + 12) x 7 =
// 371, blocks 679, head 14; 2,422 parameters in all.
dtlab::model::Gpt2Config odd_gpt2(bool tied = true) {
  dtlab::model::Gpt2Config c;
  c.vocab_size = 41;
  c.n_positions = 12;
  c.n_embd = 7;
  c.n_layer = 3;
  c.n_head = 1;
  c.tie_word_embeddings = tied;
  dtlab::model::Gpt2Overrides::dropout(0.0).apply(c);
  return c;
}

dtlab::model::Gpt2LMHeadModel build(const dtlab::model::Gpt2Config& config) {
  std::lock_guard<std::mutex> lock(dtlab::test::global_generator_mutex());
  torch::manual_seed(5);
  return dtlab::model::Gpt2LMHeadModel(config);
}

// gpt2_units against the units the kit cuts its own model into (make_units, gpt2_unit_of) and the
// stages the kit's FSDP reads them at (gpt2_stage_units).
void expect_units_of_the_kit(const dtlab::model::Gpt2Config& config) {
  const dtlab::shard::ModelUnits paper = dtlab::shard::gpt2_units(config);
  auto model = build(config);
  const std::vector<dtlab::shard::ShardUnit> units = dtlab::shard::make_units(*model, 1, 0, dtlab::shard::gpt2_unit_of);
  ASSERT_EQ(paper.names.size(), units.size());
  for (size_t u = 0; u < units.size(); ++u) {
    EXPECT_EQ(paper.names[u], units[u].name);
    EXPECT_EQ(paper.numel[u], units[u].flat->layout().numel) << units[u].name;
  }
  EXPECT_EQ(paper.stage_units, dtlab::shard::gpt2_stage_units(model, units));
  int64_t counted = 0;
  for (const auto& p : model->parameters()) counted += p.numel();  // a tied parameter once
  EXPECT_EQ(paper.parameters(), counted);
}

TEST(Gpt2Units, AreTheKitsUnits) {
  expect_units_of_the_kit(odd_gpt2());
  expect_units_of_the_kit(odd_gpt2(/*tied=*/false));
  dtlab::model::Gpt2Config mini = dtlab::model::Gpt2Config::preset("gpt2-mini");
  mini.vocab_size = 1482;  // fixtures/gpt2-tiny's, as run_lm resizes it
  expect_units_of_the_kit(mini);
}

// Hugging Face's counts of its checkpoints (model.num_parameters(), the lm head tied).
TEST(Gpt2Units, CountAsHuggingFace) {
  const auto count = [](const char* name) {
    return dtlab::shard::gpt2_units(dtlab::shard::gpt2_checkpoint_config(name)).parameters();
  };
  EXPECT_EQ(count("gpt2"), 124'439'808);
  EXPECT_EQ(count("gpt2-medium"), 354'823'168);
  EXPECT_EQ(count("gpt2-large"), 774'030'080);
  EXPECT_EQ(count("gpt2-xl"), 1'557'611'200);
  EXPECT_THROW(dtlab::shard::gpt2_checkpoint_config("gpt3"), dtlab::Error);
}

// docs/MEASUREMENTS.md, "Sharding": gpt2-mini with gpt2-tiny's 1,482 tokens (1,114,112
// parameters), rank 0 of 3.
TEST(MemoryModel, GivesTheFiguresOfMeasurements) {
  dtlab::model::Gpt2Config mini = dtlab::model::Gpt2Config::preset("gpt2-mini");
  mini.vocab_size = 1482;
  const dtlab::shard::ModelUnits units = dtlab::shard::gpt2_units(mini);
  EXPECT_EQ(units.parameters(), 1'114'112);
  const RankMemory zero1 = rank_memory(units, Stage::kZero1, 3);
  const RankMemory zero2 = rank_memory(units, Stage::kZero2, 3);
  const RankMemory fsdp = rank_memory(units, Stage::kFsdp, 3);
  EXPECT_EQ(zero1.padding, 7);
  for (const RankMemory& m : {zero1, zero2, fsdp}) EXPECT_EQ(m.optimizer_state_bytes, 2'970'984);
  EXPECT_EQ(zero1.sampled_gradient_bytes, 4'456'448);  // the gradient; each unit's flat copy freed in turn
  EXPECT_EQ(zero2.sampled_gradient_bytes, 1'283'072);
  EXPECT_EQ(fsdp.sampled_gradient_bytes, 1'283'072);
  EXPECT_EQ(zero1.parameter_bytes, 4'456'476);
  EXPECT_EQ(zero2.parameter_bytes, 4'456'476);
  EXPECT_EQ(fsdp.parameter_bytes, 2'076'168);
  // One process: the 8,912,896 bytes of moments and the 4,456,448-byte gradient.
  const RankMemory one = rank_memory(units, Stage::kOneProcess, 1);
  EXPECT_EQ(one.optimizer_state_bytes, 8'912'896);
  EXPECT_EQ(one.gradient_bytes, 4'456'448);
}

TEST(MemoryModel, RefusesWhatIsNoModel) {
  const dtlab::shard::ModelUnits units = dtlab::shard::gpt2_units(odd_gpt2());
  EXPECT_THROW_WITH(rank_memory(units, Stage::kZero1, 0), dtlab::Error, "at least 1 rank");
  EXPECT_THROW_WITH(rank_memory(units, Stage::kZero1, 2, 2), dtlab::Error, "rank 2 is not in a world of 2");
  dtlab::shard::ModelUnits bad = units;
  bad.numel[1] = -1;
  EXPECT_THROW_WITH(rank_memory(bad, Stage::kZero2, 2), dtlab::Error, "transformer.h.0 has -1 elements");
  bad = units;
  bad.stage_units[0].push_back(99);
  EXPECT_THROW_WITH(rank_memory(bad, Stage::kFsdp, 2), dtlab::Error, "reads unit 99");
  bad = units;
  bad.stage_units.pop_back();  // the head read by no stage
  EXPECT_THROW_WITH(rank_memory(bad, Stage::kFsdp, 2), dtlab::Error, "no stage reads unit head");
  dtlab::model::Gpt2Config none = odd_gpt2();
  none.n_layer = 0;
  EXPECT_THROW_WITH(dtlab::shard::gpt2_units(none), dtlab::Error, "n_layer");
}

// One process (each DDP replica): the kit's own AdamW and gradient, whole.
TEST(MemoryModel, OneProcessHoldsWhatTheKitsStepHolds) {
  auto model = build(odd_gpt2());
  const RankMemory paper = rank_memory(dtlab::shard::gpt2_units(odd_gpt2()), Stage::kOneProcess, 1);
  dtlab::train::TrainState state;
  state.module = model.ptr();
  state.optimizer = dtlab::train::make_adamw(*model, {3e-3, 0.1, 1e-8});
  state.scheduler = std::make_unique<dtlab::train::LinearWarmupSchedule>(*state.optimizer, 1, 2);
  const torch::Tensor ids = torch::arange(20, torch::kInt64).reshape({2, 10}).remainder(41);
  dtlab::model::lm_loss(model->forward(ids).logits, ids).backward();
  int64_t gradient = 0, values = 0;
  for (const auto& p : model->parameters()) {
    gradient += p.grad().numel() * 4;
    values += p.numel() * 4;
  }
  dtlab::train::apply_update(state);
  EXPECT_EQ(paper.gradient_bytes, gradient);
  EXPECT_EQ(paper.parameter_bytes, values);
  EXPECT_EQ(paper.optimizer_state_bytes, dtlab::shard::optimizer_state_bytes(*state.optimizer));
}

dtlab::shard::MakeShardStrategy the_reference() {
  return [](int stage, const dtlab::shard::ShardContext& c) {
    if (stage == 1) return dtlab::zero::make_zero1(c);
    return stage == 2 ? dtlab::zero::make_zero2(c) : dtlab::zero::make_fsdp(c);
  };
}

// The reference's strategy, and the whole-unit bytes held just after each stage's backward has
// gathered its units (a hook on the stage's output, hung after the strategy's own): where FSDP's
// backward holds the most, which the kit's meter (forward stages only) does not see.
class BackwardGathers final : public dtlab::shard::ShardStrategy {
 public:
  BackwardGathers(std::unique_ptr<dtlab::shard::ShardStrategy> inner, const dtlab::shard::ShardContext& context,
                  int64_t& peak)
      : inner_(std::move(inner)), units_(*context.units), peak_(peak) {}
  void before_backward() override { inner_->before_backward(); }
  void after_backward() override { inner_->after_backward(); }
  void after_update() override { inner_->after_update(); }
  void before_stage(int64_t stage) override { inner_->before_stage(stage); }
  void after_stage(int64_t stage, const torch::Tensor& output) override {
    inner_->after_stage(stage, output);
    if (!output.requires_grad()) return;
    output.register_hook([this](const torch::Tensor& grad) {
      int64_t held = 0;
      for (const auto& unit : units_) {
        if (unit.flat->values_allocated()) held += 4 * unit.flat->layout().padded_numel();
      }
      peak_ = std::max(peak_, held);
      return grad;
    });
  }

 private:
  std::unique_ptr<dtlab::shard::ShardStrategy> inner_;
  std::vector<dtlab::shard::ShardUnit>& units_;
  int64_t& peak_;
};

Stage stage_of(int zero_stage) { return zero_stage == 1 ? Stage::kZero1 : zero_stage == 2 ? Stage::kZero2 : Stage::kFsdp; }

class Measured : public ::testing::TestWithParam<std::tuple<int, int>> {};

// Two steps (a flat copy left over from the first would show in the second's samples) and every
// rank's summary against the model of that rank.
TEST_P(Measured, AsTheModelSays) {
  // Plain copies, not the structured binding itself: C++17 does not let a lambda capture one.
  const int zero_stage = std::get<0>(GetParam()), world = std::get<1>(GetParam());
  const dtlab::shard::ModelUnits units = dtlab::shard::gpt2_units(odd_gpt2());
  dtlab::test::run_ranks(world, [&](dtlab::dist::Group& group) {
    auto model = build(odd_gpt2());
    int64_t backward_gathered = 0;
    const dtlab::shard::MakeShardStrategy reference = the_reference();
    dtlab::shard::ShardedTrainer trainer(model, group, zero_stage, [&](int stage, const dtlab::shard::ShardContext& c) {
      return std::make_unique<BackwardGathers>(reference(stage, c), c, backward_gathered);
    });
    dtlab::train::TrainState state;
    state.module = model.ptr();
    state.optimizer = trainer.make_optimizer({3e-3, 0.1, 1e-8});
    state.scheduler = std::make_unique<dtlab::train::LinearWarmupSchedule>(*state.optimizer, 1, 2);
    state.max_grad_norm = 1.0;
    const int64_t rows = 6 / world;
    torch::Tensor ids;
    state.loss = [&](const dtlab::data::Batch&) { return dtlab::model::lm_loss(model->forward(ids).logits, ids); };
    const dtlab::train::StepFunction step = trainer.step();
    for (int s = 1; s <= 2; ++s) {
      ids = torch::arange(60, torch::kInt64).reshape({6, 10}).mul(3 + s).remainder(41).narrow(0, group.rank() * rows, rows);
      dtlab::data::Batch batch;
      dtlab::train::StepInput input;
      input.step = s;
      input.batch = &batch;
      step(state, input);
    }
    const nlohmann::json held = trainer.summary(*state.optimizer, "test");
    const RankMemory paper = rank_memory(units, stage_of(zero_stage), world, group.rank());
    EXPECT_EQ(held.at("parameters").get<int64_t>(), units.parameters()) << held.dump();
    EXPECT_EQ(held.at("padding").get<int64_t>(), paper.padding) << held.dump();
    EXPECT_EQ(held.at("shard_elements").get<int64_t>(), paper.shard_elements) << held.dump();
    // Exact: the moments of this rank's real elements, none of its padding.
    EXPECT_EQ(held.at("optimizer_state_bytes").get<int64_t>(), paper.optimizer_state_bytes) << held.dump();
    // Exact: what the meter sees at its samples (Note [Memory model]).
    EXPECT_EQ(held.at("peak_gradient_bytes").get<int64_t>(), paper.sampled_gradient_bytes) << held.dump();
    // Exact: ZeRO-1/2 the padded buffers, FSDP the gathered units sampled at every forward stage.
    EXPECT_EQ(held.at("peak_parameter_bytes").get<int64_t>(), paper.parameter_bytes) << held.dump();
    // FSDP's backward holds no more than its forward: a unit's gradient hook frees it before the
    // stage before gathers (autograd runs the accumulators first).
    if (zero_stage == 3) {
      EXPECT_EQ(backward_gathered, paper.parameter_bytes) << held.dump();
    }
    // The true gradient peak is above the sample by what is made and freed between two samples:
    // a unit's flat copy and its ring buffer (ZeRO-1: in after_backward, the largest such; ZeRO-2,
    // FSDP: in unit_ready, after the hook, the largest unit's).
    int64_t between = 0;
    if (zero_stage == 1) {
      for (int64_t n : units.numel) {
        const dtlab::shard::ShardLayout layout = dtlab::shard::shard_layout(n, world);
        between = std::max(between, 4 * (layout.padded_numel() + layout.shard_numel()));
      }
    } else {
      const size_t largest = static_cast<size_t>(
          std::max_element(units.numel.begin(), units.numel.end()) - units.numel.begin());
      const dtlab::shard::ShardLayout layout = dtlab::shard::shard_layout(units.numel[largest], world);
      between = 4 * (layout.padded_numel() + layout.shard_numel());
    }
    EXPECT_EQ(paper.gradient_bytes, held.at("peak_gradient_bytes").get<int64_t>() + between) << held.dump();
    EXPECT_EQ(paper.gradient_piece_bytes, 4 * paper.shard_elements);
    EXPECT_EQ(paper.parameter_piece_bytes, zero_stage == 3 ? 4 * paper.shard_elements : 0);
  });
}

INSTANTIATE_TEST_SUITE_P(StagesAndWorlds, Measured, ::testing::Combine(::testing::Values(1, 2, 3), ::testing::Values(2, 3)));

// The handout's table: GiB per rank (rank 0, which holds the most moments), activations excluded.
std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::vector<std::string> memory_table() {
  std::vector<std::string> rows = {"| model | parameters | ranks | DDP | ZeRO-1 | ZeRO-2 | FSDP | loading, sharded |",
                                   "|---|---|---|---|---|---|---|---|"};
  const std::vector<std::pair<const char*, const char*>> models = {
      {"gpt2", "GPT-2 small"}, {"gpt2-medium", "GPT-2 medium"}, {"gpt2-large", "GPT-2 large"}, {"gpt2-xl", "GPT-2 XL"}};
  for (const auto& [name, label] : models) {
    const dtlab::shard::ModelUnits units = dtlab::shard::gpt2_units(dtlab::shard::gpt2_checkpoint_config(name));
    for (int world : {1, 2, 4, 8}) {
      std::string row = world == 1 ? fmt::format("| {} | {} | {} |", label, with_commas(units.parameters()), world)
                                   : fmt::format("| | | {} |", world);
      for (Stage stage : {Stage::kOneProcess, Stage::kZero1, Stage::kZero2, Stage::kFsdp}) {
        row += fmt::format(" {:.2f} |", double(rank_memory(units, stage, world).total_bytes()) / double(1 << 30));
      }
      row += fmt::format(" {:.2f} |", double(dtlab::shard::load_peak_bytes(units, world)) / double(1 << 30));
      rows.push_back(row);
    }
  }
  return rows;
}

TEST(Handout, TableIsTheModels) {
  const std::string text = dtlab::io::read_file(std::filesystem::path(DTLAB_SOURCE_DIR) / "handouts" / "zero.md");
  const std::string begin = "<!-- memory-table begin -->", end = "<!-- memory-table end -->";
  const size_t from = text.find(begin), to = text.find(end);
  ASSERT_NE(from, std::string::npos) << "handouts/zero.md has no " << begin;
  ASSERT_NE(to, std::string::npos) << "handouts/zero.md has no " << end;
  ASSERT_LT(from, to);
  std::vector<std::string> rows;
  std::istringstream lines(text.substr(from + begin.size(), to - from - begin.size()));
  for (std::string line; std::getline(lines, line);) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) rows.push_back(line);
  }
  const std::vector<std::string> expected = memory_table();
  std::string want;
  for (const std::string& row : expected) want += row + "\n";
  EXPECT_EQ(rows, expected) << "handouts/zero.md's table between " << begin << " and " << end
                            << " is not the memory model's (shard/memory_model.h); the model's:\n" << want;
}

}  // namespace shard_memory_model_test
