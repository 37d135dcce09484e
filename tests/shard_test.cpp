// The pieces ZeRO stands on (Note [Flat parameters], shard/): the layout of a flat buffer over
// ranks with its padding, parameters that are views of the buffer, and AdamW on one rank's piece,
// which must give every element exactly what one process's AdamW gives it.
#include <gtest/gtest.h>


#include <memory>
#include <string>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/shard/flat_parameters.h"
#include "dtlab/shard/shard_optimizer.h"
#include "dtlab/shard/units.h"
#include "dtlab/train/optimizer.h"
#include "tiny_model.h"

namespace shard_test {

using dtlab::shard::FlatParameters;

// 65 parameters, which 2 and 3 do not divide (tiny_model.h).
using Tiny = dtlab::test::TinyModel;

std::shared_ptr<Tiny> tiny(int seed) {
  torch::manual_seed(seed);
  auto m = std::make_shared<Tiny>();
  // Layer norm starts at ones and zeros: random values make its update differ from the others'.
  torch::NoGradGuard no_grad;
  for (auto& p : m->parameters()) p.copy_(torch::randn_like(p));
  return m;
}

TEST(ShardLayout, PiecesAreEqualAndPadTheEnd) {
  const auto l = dtlab::shard::shard_layout(65, 3);
  EXPECT_EQ(l.shard_numel(), 22);
  EXPECT_EQ(l.padded_numel(), 66);
  EXPECT_EQ(l.padding(), 1);
  EXPECT_EQ(l.begin(0), 0);
  EXPECT_EQ(l.end(0), 22);
  EXPECT_EQ(l.begin(2), 44);
  EXPECT_EQ(l.end(2), 66);
  EXPECT_EQ(dtlab::shard::shard_layout(66, 3).padding(), 0);
  EXPECT_EQ(dtlab::shard::shard_layout(2, 4).shard_numel(), 1);  // two ranks hold only padding
  EXPECT_THROW(dtlab::shard::shard_layout(10, 0), dtlab::Error);
}

TEST(ShardLayout, PiecesOfSegmentsCutAtTheBounds) {
  std::vector<dtlab::shard::FlatSegment> segments = {{"a", 0, 10, {10}}, {"b", 10, 5, {5}}, {"c", 15, 7, {7}}};
  const auto pieces = dtlab::shard::pieces_in(segments, 8, 16);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].segment->name, "a");
  EXPECT_EQ(pieces[0].offset, 8);
  EXPECT_EQ(pieces[0].count, 2);
  EXPECT_EQ(pieces[1].offset, 10);
  EXPECT_EQ(pieces[1].count, 5);
  EXPECT_EQ(pieces[2].offset, 15);
  EXPECT_EQ(pieces[2].count, 1);
  EXPECT_TRUE(dtlab::shard::pieces_in(segments, 22, 24).empty());  // the padding
}

TEST(FlatParameters, TheModelReadsAndWritesTheBuffer) {
  auto model = tiny(1);
  const torch::Tensor before = model->fc->weight.detach().clone();
  FlatParameters flat(*model, 3);
  ASSERT_EQ(flat.layout().numel, 65);
  ASSERT_EQ(flat.segments().size(), 5u);
  EXPECT_EQ(flat.segments()[0].name, "fc.weight");
  EXPECT_FALSE(flat.segments()[0].exempt_from_weight_decay);
  EXPECT_EQ(flat.segments()[1].name, "fc.bias");
  EXPECT_TRUE(flat.segments()[1].exempt_from_weight_decay);
  EXPECT_EQ(flat.segments()[4].name, "out.weight");
  EXPECT_EQ(flat.segments()[4].offset, 50);
  EXPECT_TRUE(torch::equal(model->fc->weight, before));  // the same values, now in the buffer
  EXPECT_EQ(flat.values()[65].item<float>(), 0.0f);        // the padding
  flat.values()[2] = 42.0f;                                // fc.weight[0][2]
  EXPECT_EQ(model->fc->weight[0][2].item<float>(), 42.0f);
  {
    torch::NoGradGuard no_grad;
    model->out->weight.fill_(-1.0f);
  }
  EXPECT_EQ(flat.values()[50].item<float>(), -1.0f);
  EXPECT_TRUE(model->fc->weight.requires_grad());  // still a parameter autograd fills
  model->forward(torch::randn({4, 7})).sum().backward();
  EXPECT_TRUE(model->fc->weight.grad().defined());
}

TEST(FlatParameters, GradientsEndToEndWithZerosWhereNone) {
  auto model = tiny(2);
  FlatParameters flat(*model, 4);  // 65 -> 68: padding of 3
  EXPECT_FALSE(flat.gradients().defined());
  model->fc->weight.mutable_grad() = torch::full({5, 7}, 2.0f);
  model->out->weight.mutable_grad() = torch::full({3, 5}, 3.0f);
  flat.flatten_gradients();
  const torch::Tensor g = flat.gradients();
  ASSERT_EQ(g.numel(), 68);
  EXPECT_EQ(g.narrow(0, 0, 35).sum().item<float>(), 70.0f);
  EXPECT_EQ(g.narrow(0, 35, 15).abs().sum().item<float>(), 0.0f);  // fc.bias, norm: no gradient
  EXPECT_EQ(g.narrow(0, 50, 15).sum().item<float>(), 45.0f);
  EXPECT_EQ(g.narrow(0, 65, 3).abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(flat.shard(g, 3).numel(), 17);
  EXPECT_THROW(flat.shard(g, 4), dtlab::Error);
  flat.release_gradients();
  EXPECT_EQ(flat.bytes(), 68 * 4);
}

TEST(FlatParameters, RefusesOtherDtypesByName) {
  auto model = tiny(3);
  model->out->to(torch::kDouble);
  try {
    FlatParameters flat(*model, 2);
    FAIL() << "a double parameter was flattened into a float buffer";
  } catch (const dtlab::Error& e) {
    EXPECT_NE(std::string(e.what()).find("out.weight"), std::string::npos) << e.what();
  }
}

// World 3 over 65 parameters: three replicas, each updating only its piece with the shard AdamW,
// then every piece copied into every replica (what all-gather does), against one model with the
// kit's make_adamw, with weight decay and a changing learning rate. Bit for bit: AdamW is element by element and both run the same loop.
TEST(ShardAdamW, EveryElementGetsOneProcesssUpdate) {
  const int world = 3;
  const dtlab::train::OptimizerOptions options{/*learning_rate=*/1e-2, /*weight_decay=*/0.1, /*adam_epsilon=*/1e-8};
  auto reference = tiny(4);
  auto reference_optimizer = dtlab::train::make_adamw(*reference, options);
  std::vector<std::shared_ptr<Tiny>> replicas;
  std::vector<std::unique_ptr<FlatParameters>> flats;
  std::vector<torch::Tensor> shard_gradients;
  std::vector<std::unique_ptr<torch::optim::AdamW>> optimizers;
  for (int r = 0; r < world; ++r) {
    replicas.push_back(tiny(4));
    flats.push_back(std::make_unique<FlatParameters>(*replicas[r], world));
    shard_gradients.push_back(torch::zeros({flats[r]->layout().shard_numel()}));
    optimizers.push_back(dtlab::shard::make_shard_adamw(*flats[r], r, shard_gradients[r], options));
  }
  int64_t state_bytes = 0;
  for (int step = 1; step <= 6; ++step) {
    const double lr = 1e-2 / step;
    for (auto& g : reference_optimizer->param_groups()) g.options().set_lr(lr);
    torch::manual_seed(100 + step);
    const torch::Tensor x = torch::randn({4, 7});
    reference->forward(x).pow(2).sum().backward();
    for (auto& model : replicas) model->forward(x).pow(2).sum().backward();
    reference_optimizer->step();
    reference->zero_grad(/*set_to_none=*/true);
    for (int r = 0; r < world; ++r) {
      flats[r]->flatten_gradients();
      shard_gradients[r].copy_(flats[r]->shard(flats[r]->gradients(), r));
      for (auto& g : optimizers[r]->param_groups()) g.options().set_lr(lr);
      optimizers[r]->step();
      replicas[r]->zero_grad(/*set_to_none=*/true);
    }
    for (int r = 0; r < world; ++r) {
      for (int owner = 0; owner < world; ++owner) {
        flats[r]->shard(flats[r]->values(), owner).copy_(flats[owner]->shard(flats[owner]->values(), owner));
      }
    }
    for (int r = 0; r < world; ++r) {
      const auto mine = replicas[r]->named_parameters(), theirs = reference->named_parameters();
      for (const auto& item : theirs) {
        EXPECT_TRUE(torch::equal(mine[item.key()], item.value())) << "step " << step << " rank " << r << " "
                                                                   << item.key();
      }
    }
  }
  for (int r = 0; r < world; ++r) {
    const int64_t bytes = dtlab::shard::optimizer_state_bytes(*optimizers[r]);
    EXPECT_LE(bytes, 2 * 4 * flats[r]->layout().shard_numel()) << "rank " << r;
    state_bytes += bytes;
  }
  // Together the ranks hold exactly one process's moments: 2 floats per parameter.
  EXPECT_EQ(state_bytes, dtlab::shard::optimizer_state_bytes(*reference_optimizer));
  EXPECT_EQ(state_bytes, 2 * 4 * 65);
  // The padding is nobody's parameter: it stays zero.
  EXPECT_EQ(flats[2]->values()[65].item<float>(), 0.0f);
}

TEST(ShardAdamW, RefusesAGradientBufferOfAnotherSize) {
  auto model = tiny(5);
  FlatParameters flat(*model, 2);
  EXPECT_THROW(dtlab::shard::make_shard_adamw(flat, 0, torch::zeros({32}), {}), dtlab::Error);
}

// Note [Reading only what a rank keeps]: each rank fills its pieces from a source of parameter
// values, reading only the elements its pieces hold; the pieces of 3 ranks together are the
// source's model (the padding untouched), and a later source of the same parameter wins.
TEST(FillPieces, EachRankReadsItsPiecesAndTogetherTheyAreTheSource) {
  auto source = tiny(7);
  const auto unit_of = [](const std::string& p) { return p.rfind("fc.", 0) == 0 ? std::string("fc") : std::string("rest"); };
  std::vector<torch::Tensor> whole;  // per unit: the source's values, flat, from the ranks' pieces
  int64_t read_in_all = 0;
  for (int rank = 0; rank < 3; ++rank) {
    auto model = tiny(1);
    std::vector<dtlab::shard::ShardUnit> units = dtlab::shard::make_units(*model, 3, rank, unit_of);
    dtlab::shard::keep_only_pieces(units, rank);
    std::vector<dtlab::shard::PieceSource> sources;
    int64_t asked = 0;
    for (const auto& item : source->named_parameters()) {
      const torch::Tensor values = item.value().detach().reshape({-1});
      sources.push_back({item.key(), [values, &asked](int64_t begin, torch::Tensor into) {
                           asked += into.numel();
                           into.copy_(values.narrow(0, begin, into.numel()));
                         }});
    }
    const int64_t read = dtlab::shard::fill_pieces(units, rank, sources);
    EXPECT_EQ(read, asked);
    read_in_all += read;
    if (whole.empty()) {
      for (const auto& u : units) whole.push_back(torch::zeros({u.flat->layout().padded_numel()}));
    }
    for (size_t u = 0; u < units.size(); ++u) {
      whole[u].narrow(0, units[u].flat->layout().begin(rank), units[u].flat->layout().shard_numel())
          .copy_(units[u].shard_values);
    }
  }
  EXPECT_EQ(read_in_all, 65) << "every element read once, by the rank whose piece holds it";
  // The source's model, unit by unit, in make_units' order, padding zero.
  auto reference = tiny(7);
  std::vector<dtlab::shard::ShardUnit> expected = dtlab::shard::make_units(*reference, 3, 0, unit_of);
  ASSERT_EQ(expected.size(), whole.size());
  for (size_t u = 0; u < whole.size(); ++u) EXPECT_TRUE(torch::equal(whole[u], expected[u].flat->values())) << u;

  auto model = tiny(1);
  // Rank 2's piece of unit fc (40 elements, pieces of 14) holds fc.bias, elements [35, 40).
  std::vector<dtlab::shard::ShardUnit> units = dtlab::shard::make_units(*model, 3, 2, unit_of);
  const std::vector<dtlab::shard::PieceSource> twice = {
      {"fc.bias", [](int64_t, torch::Tensor into) { into.fill_(1.0f); }},
      {"fc.bias", [](int64_t, torch::Tensor into) { into.fill_(2.0f); }}};
  dtlab::shard::fill_pieces(units, 2, twice);
  EXPECT_EQ(model->fc->bias[0].item<float>(), 2.0f) << "the later source wins";
  EXPECT_THROW(dtlab::shard::fill_pieces(units, 2, {{"nowhere.weight", [](int64_t, torch::Tensor) {}}}), dtlab::Error);
}

}  // namespace shard_test
