// The kit's context-parallel GPT-2 (cp/gpt2_cp.h) with the reference's ring attention, on 1, 2 and
// 3 thread ranks, against one process's GPT-2: the logits of every rank's positions, and the
// gradient of every parameter summed over the ranks (Note [The loss of a split sequence]) against
// one process's, at a length that 2N does not divide (the rows padded), balanced and contiguous.
// The split itself: positions, padding, chunks that are not two of the 2N.
#include <gtest/gtest.h>

#include <torch/nn/functional/loss.h>
#include <torch/types.h>

#include <mutex>
#include <string>
#include <vector>

#include "dist_test_util.h"
#include "dtlab/core/error.h"
#include "dtlab/cp/gpt2_cp.h"
#include "dtlab/model/gpt2.h"
#include "tp_test_util.h"

namespace {

constexpr double kTolerance = 1e-5;  // relative to each tensor's largest value

struct Batch {
  torch::Tensor ids, labels, weights;
};

Batch make_batch(int64_t rows, int64_t length) {
  torch::manual_seed(5);
  Batch b;
  b.ids = torch::randint(dtlab::test::kTpVocab, {rows, length}, torch::kLong);
  b.labels = torch::randint(dtlab::test::kTpVocab, {rows, length}, torch::kLong);
  b.weights = (torch::rand({rows, length}) > 0.3).to(torch::kFloat);
  return b;
}

// sum(ce * w) / tokens over the positions given.
torch::Tensor loss_of(const torch::Tensor& logits, const torch::Tensor& labels, const torch::Tensor& weights,
                      double tokens) {
  namespace F = torch::nn::functional;
  const torch::Tensor ce = F::cross_entropy(logits.reshape({-1, logits.size(-1)}), labels.reshape(-1),
                                            F::CrossEntropyFuncOptions().reduction(torch::kNone));
  return (ce * weights.reshape(-1)).sum() / tokens;
}

std::vector<torch::Tensor> grads_of(const dtlab::model::Gpt2LMHeadModel& m) {
  std::vector<torch::Tensor> out;
  for (const auto& p : m->parameters()) out.push_back(p.grad().clone());
  return out;
}

void check_split(int ranks, bool balanced) {
  const int64_t rows = 2, length = 11;  // 2N = 4 or 6: padded to 12
  const Batch b = make_batch(rows, length);
  const double tokens = b.weights.sum().item<double>();
  dtlab::model::Gpt2LMHeadModel one = dtlab::test::small_tp_gpt2();
  one->train();
  const torch::Tensor logits = one->forward(b.ids).logits;
  loss_of(logits, b.labels, b.weights, tokens).backward();
  const std::vector<torch::Tensor> want = grads_of(one);

  std::vector<torch::Tensor> summed;
  std::vector<std::string> logit_errors(ranks);
  std::mutex m;
  dtlab::test::run_ranks(ranks, [&](dtlab::dist::Group& group) {
    dtlab::model::Gpt2LMHeadModel mine = dtlab::test::small_tp_gpt2();
    mine->train();
    dtlab::cp::ContextParallelGpt2 model(mine, group, /*block=*/2, balanced);
    const dtlab::cp::SequenceSplit split = dtlab::cp::split_sequence(length, group.rank(), ranks, balanced);
    const torch::Tensor local = model.forward(b.ids, split);
    // Each real position's logits are one process's at the same position.
    const torch::Tensor real = split.positions < length;
    const torch::Tensor at = split.positions.masked_select(real);
    const double diff =
        (local.index_select(1, real.nonzero().reshape(-1)) - logits.detach().index_select(1, at)).abs().max().item<double>();
    loss_of(local, dtlab::cp::local_positions(b.labels, split, 0), dtlab::cp::local_positions(b.weights, split, 0),
            tokens)
        .backward();
    std::lock_guard<std::mutex> lock(m);
    if (diff > kTolerance * logits.abs().max().item<double>()) {
      logit_errors[static_cast<size_t>(group.rank())] = "logits differ by " + std::to_string(diff);
    }
    const std::vector<torch::Tensor> g = grads_of(mine);
    if (summed.empty()) {
      summed = g;
    } else {
      for (size_t i = 0; i < g.size(); ++i) summed[i] += g[i];
    }
  });
  const std::string what = std::to_string(ranks) + " ranks, " + (balanced ? "balanced" : "contiguous");
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(logit_errors[static_cast<size_t>(r)], "") << what << ", rank " << r;
  ASSERT_EQ(summed.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, dtlab::test::relative_difference(summed[i], want[i]));
  }
  std::printf("%s: the ranks' gradients sum to one process's within %.1e\n", what.c_str(), worst);
  EXPECT_LE(worst, kTolerance) << what;
}

TEST(ContextParallelGpt2, EqualsOneProcessAtEveryRank) {
  for (int ranks : {1, 2, 3}) check_split(ranks, /*balanced=*/true);
  check_split(3, /*balanced=*/false);
}

TEST(ContextParallelGpt2, SplitsPadAndPlacePositions) {
  const dtlab::cp::SequenceSplit s = dtlab::cp::split_sequence(11, 1, 3, true);  // chunks 1 and 4 of 6
  EXPECT_EQ(s.padded, 12);
  EXPECT_EQ(s.chunk, 2);
  EXPECT_EQ(s.chunks, (std::vector<int64_t>{1, 4}));
  EXPECT_TRUE(torch::equal(s.positions, torch::tensor({2, 3, 8, 9}, torch::kLong)));
  const torch::Tensor x = torch::arange(22, torch::kFloat).reshape({2, 11});
  const torch::Tensor local = dtlab::cp::local_positions(x, dtlab::cp::split_sequence(11, 2, 3, true), -1);
  // Rank 2 holds chunks 2 and 3: positions 4..7, all real.
  EXPECT_TRUE(torch::equal(local[0], torch::tensor({4.f, 5.f, 6.f, 7.f})));
  // Rank 0 holds chunks 0 and 5: position 11 is padding.
  const torch::Tensor first = dtlab::cp::local_positions(x, dtlab::cp::split_sequence(11, 0, 3, true), -1);
  EXPECT_TRUE(torch::equal(first[1], torch::tensor({11.f, 12.f, 21.f, -1.f})));
}

TEST(ContextParallelGpt2, RowsLongerThanThePositionsAreAnError) {
  dtlab::test::run_ranks(2, [&](dtlab::dist::Group& group) {
    dtlab::model::Gpt2LMHeadModel mine = dtlab::test::small_tp_gpt2();
    dtlab::cp::ContextParallelGpt2 model(mine, group, 4, true);
    const torch::Tensor ids = torch::zeros({1, 15}, torch::kLong);  // padded to 16: fits
    EXPECT_NO_THROW(model.forward(ids, dtlab::cp::split_sequence(15, group.rank(), 2, true)));
    const torch::Tensor longer = torch::zeros({1, 17}, torch::kLong);  // padded to 20 > 16
    try {
      model.forward(longer, dtlab::cp::split_sequence(17, group.rank(), 2, true));
      ADD_FAILURE() << "no error";
    } catch (const dtlab::Error& e) {
      EXPECT_NE(std::string(e.what()).find("exceed n_positions 16"), std::string::npos) << e.what();
    }
  });
}

}  // namespace
