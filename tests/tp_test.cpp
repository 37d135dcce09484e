// The tp contract's reference (solutions/tp/) on thread ranks over Gloo (dist_test_util.h): f and
// g forward and backward; the c_attn columns of each rank's heads; the vocabulary shards; the
// vocabulary-parallel cross-entropy against torch's, padding columns and ignored targets
// included, with only [N]-sized all-reduces; the loss of the same recipe on gathered logits, off
// by log TP; and the kit's tensor-parallel GPT-2 (tp/gpt2_tp.h) at TP 2 and 3 against one
// process: logits, loss and every parameter's gradient.
#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "dist_test_util.h"
#include "tp_test_util.h"
#include "dtlab/core/error.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/tasks/tp.h"
#include "dtlab/tp/gpt2_tp.h"

namespace tp_test {

using dtlab::dist::Group;
using dtlab::test::all_reduce_count;
using dtlab::tp::hf_name;
using dtlab::test::relative_difference;
using dtlab::test::run_ranks;
namespace F = torch::nn::functional;

// A vocabulary that TP 2 and 3 do not divide (padded to 102): the last shard holds padding.
constexpr int64_t kVocab = dtlab::test::kTpVocab, kTokens = 12;

class Operators : public ::testing::TestWithParam<int> {};

TEST_P(Operators, CopyIsTheIdentityForwardAndSumsGradientsBackward) {
  const int tp = GetParam();
  run_ranks(tp, [&](Group& group) {
    const torch::Tensor x = torch::arange(6, torch::kFloat).reshape({2, 3}).requires_grad_();
    const torch::Tensor y = dtlab::tp::copy_to_tensor_parallel(x, group, "test f");
    EXPECT_TRUE(torch::equal(y, x));
    EXPECT_EQ(all_reduce_count(group, ""), 0) << "f's forward communicates nothing";
    // Rank r's part of d loss / d x is r + 1: the whole is their sum, on every rank.
    (y * double(group.rank() + 1)).sum().backward();
    EXPECT_TRUE(torch::equal(x.grad(), torch::full({2, 3}, tp * (tp + 1) / 2.0)));
    EXPECT_EQ(all_reduce_count(group, "test f"), 1);
  });
}

TEST_P(Operators, ReduceSumsForwardAndPassesGradientsBackward) {
  const int tp = GetParam();
  run_ranks(tp, [&](Group& group) {
    const torch::Tensor x = torch::full({2, 3}, double(group.rank() + 1)).requires_grad_();
    const torch::Tensor y = dtlab::tp::reduce_from_tensor_parallel(x, group, "test g");
    EXPECT_TRUE(torch::equal(y, torch::full({2, 3}, tp * (tp + 1) / 2.0)));
    EXPECT_TRUE(torch::equal(x, torch::full({2, 3}, double(group.rank() + 1)))) << "g must not change its input";
    (y * double(group.rank() + 1)).sum().backward();
    EXPECT_TRUE(torch::equal(x.grad(), torch::full({2, 3}, double(group.rank() + 1))));
    EXPECT_EQ(all_reduce_count(group, "test g"), 1) << "g's backward communicates nothing";
  });
}

INSTANTIATE_TEST_SUITE_P(TP, Operators, ::testing::Values(2, 3));

// A column-parallel layer feeding a row-parallel one, as in a block's MLP, against the whole
// product: the output, the input's gradient (f sums the ranks' parts), every shard's gradient
// against the slice of the whole one, and the row-parallel bias's gradient whole (added once).
class Layers : public ::testing::TestWithParam<int> {};

torch::Tensor values(std::vector<int64_t> shape, double phase) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return torch::arange(n, torch::kFloat).mul(0.37).add(phase).sin().reshape(shape);
}

TEST_P(Layers, ColumnThenRowParallelEqualTheWholeProduct) {
  const int tp = GetParam();
  const int64_t in = 6, hidden = 12;
  const torch::Tensor x = values({3, 4, in}, 0.1).requires_grad_();
  const torch::Tensor w1 = values({in, hidden}, 0.2).requires_grad_(), b1 = values({hidden}, 0.3).requires_grad_();
  const torch::Tensor w2 = values({hidden, in}, 0.4).requires_grad_(), b2 = values({in}, 0.5).requires_grad_();
  const torch::Tensor upstream = values({3, 4, in}, 0.6);  // d loss / d y, not all ones
  const torch::Tensor y = torch::matmul(torch::tanh(torch::matmul(x, w1) + b1), w2) + b2;
  (y * upstream).sum().backward();
  run_ranks(tp, [&](Group& group) {
    const int64_t width = hidden / tp, first = group.rank() * width;
    const torch::Tensor my_x = x.detach().clone().requires_grad_();
    const torch::Tensor my_w1 = w1.detach().narrow(1, first, width).clone().requires_grad_();
    const torch::Tensor my_b1 = b1.detach().narrow(0, first, width).clone().requires_grad_();
    const torch::Tensor my_w2 = w2.detach().narrow(0, first, width).clone().requires_grad_();
    const torch::Tensor my_b2 = b2.detach().clone().requires_grad_();
    const torch::Tensor split = torch::tanh(dtlab::tp::column_parallel_linear(my_x, my_w1, my_b1, group, "in"));
    ASSERT_EQ(split.size(-1), width) << "a column-parallel output stays split";
    const torch::Tensor my_y = dtlab::tp::row_parallel_linear(split, my_w2, my_b2, group, "out");
    EXPECT_LT(relative_difference(my_y, y), 1e-6);
    (my_y * upstream).sum().backward();
    EXPECT_LT(relative_difference(my_x.grad(), x.grad()), 1e-6) << "d loss / d x";
    EXPECT_LT(relative_difference(my_w1.grad(), w1.grad().narrow(1, first, width)), 1e-6);
    EXPECT_LT(relative_difference(my_b1.grad(), b1.grad().narrow(0, first, width)), 1e-6);
    EXPECT_LT(relative_difference(my_w2.grad(), w2.grad().narrow(0, first, width)), 1e-6);
    EXPECT_LT(relative_difference(my_b2.grad(), b2.grad()), 1e-6);
  });
}

// Ids in every shard, the last real one (100) beside the padding included.
TEST_P(Layers, VocabParallelEmbeddingEqualsTheWholeLookup) {
  const int tp = GetParam();
  const int64_t embed = 5;
  const torch::Tensor wte = values({kVocab, embed}, 0.7).requires_grad_();
  const torch::Tensor ids = torch::tensor({{0, 100, 50, 51}, {33, 34, 67, 100}}, torch::kLong);
  const torch::Tensor upstream = values({2, 4, embed}, 0.8);
  const torch::Tensor rows = torch::embedding(wte, ids);
  (rows * upstream).sum().backward();
  run_ranks(tp, [&](Group& group) {
    const dtlab::tp::VocabShard shard = dtlab::tp::vocab_shard(kVocab, group.rank(), tp);
    const torch::Tensor padded = torch::cat({wte.detach(), torch::zeros({shard.padded - kVocab, embed})});
    const torch::Tensor padded_grad = torch::cat({wte.grad(), torch::zeros({shard.padded - kVocab, embed})});
    const torch::Tensor mine = padded.narrow(0, shard.start, shard.rows).clone().requires_grad_();
    const torch::Tensor out = dtlab::tp::vocab_parallel_embedding(ids, mine, shard, group, "embedding");
    EXPECT_TRUE(torch::allclose(out, rows, 0, 0)) << "each id's row comes from one rank, the others add 0";
    (out * upstream).sum().backward();
    EXPECT_TRUE(torch::allclose(mine.grad(), padded_grad.narrow(0, shard.start, shard.rows), 1e-6, 1e-7));
  });
}

INSTANTIATE_TEST_SUITE_P(TP, Layers, ::testing::Values(2, 3));

// GPT-2's fused c_attn: [q | k | v], each n_embd wide, head h at columns h*head_dim.. of its third.
TEST(AttentionColumns, ARankHoldsTheQKVColumnsOfItsHeads) {
  const int64_t n_embd = 48, n_head = 6, head_dim = 8;
  for (int tp : {1, 2, 3, 6}) {
    std::vector<torch::Tensor> all;
    for (int rank = 0; rank < tp; ++rank) {
      std::vector<int64_t> expected;
      for (int64_t part = 0; part < 3; ++part) {
        for (int64_t h = rank * n_head / tp; h < (rank + 1) * n_head / tp; ++h) {
          for (int64_t c = 0; c < head_dim; ++c) expected.push_back(part * n_embd + h * head_dim + c);
        }
      }
      const torch::Tensor columns = dtlab::tp::shard_gpt2_attention_columns(n_embd, n_head, rank, tp);
      EXPECT_TRUE(torch::equal(columns, torch::tensor(expected, torch::kLong))) << "TP " << tp << " rank " << rank;
      all.push_back(columns);
    }
    EXPECT_TRUE(torch::equal(std::get<0>(torch::cat(all).sort()), torch::arange(3 * n_embd, torch::kLong)))
        << "the ranks' columns are every column once";
  }
}

TEST(AttentionColumns, ATPThatDoesNotDivideTheHeadsIsNamed) {
  try {
    dtlab::tp::shard_gpt2_attention_columns(48, 6, 0, 4);
    FAIL() << "TP 4 with 6 heads was accepted";
  } catch (const dtlab::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("4"), std::string::npos) << what;
    EXPECT_NE(what.find("6"), std::string::npos) << what;
  }
}

TEST(VocabShard, PadsTheVocabularyToAMultipleOfTP) {
  const dtlab::tp::VocabShard a = dtlab::tp::vocab_shard(101, 2, 3);
  EXPECT_EQ(a.padded, 102);
  EXPECT_EQ(a.rows, 34);
  EXPECT_EQ(a.start, 68);
  const dtlab::tp::VocabShard b = dtlab::tp::vocab_shard(101, 1, 2);
  EXPECT_EQ(b.padded, 102);
  EXPECT_EQ(b.rows, 51);
  EXPECT_EQ(b.start, 51);
  EXPECT_EQ(dtlab::tp::vocab_shard(100, 3, 4).padded, 100);
}

// Logits of N tokens over a vocabulary of kVocab, padded for `tp` with columns of 50: far above
// the real logits, so that a padding column that counted would move the loss by a lot.

torch::Tensor real_logits() {
  return torch::arange(kTokens * kVocab, torch::kFloat).reshape({kTokens, kVocab}).mul(0.731).sin().mul(3.0);
}

torch::Tensor padded_logits(int tp) {
  const int64_t padded = dtlab::tp::vocab_shard(kVocab, 0, tp).padded;
  return torch::cat({real_logits(), torch::full({kTokens, padded - kVocab}, 50.0f)}, 1);
}

// Ids at both ends of the vocabulary (100 is the last real one, beside the padding), and two ignored.
torch::Tensor targets() {
  return torch::tensor({0, 100, 7, 50, -100, 33, 34, 67, 68, 99, -100, 51}, torch::kLong);
}

class VocabCrossEntropy : public ::testing::TestWithParam<int> {};

TEST_P(VocabCrossEntropy, EqualsTorchsWithPaddingAndIgnoredTargets) {
  const int tp = GetParam();
  const torch::Tensor whole = real_logits().requires_grad_();
  const torch::Tensor expected =
      F::cross_entropy(whole, targets(), F::CrossEntropyFuncOptions().ignore_index(dtlab::model::kIgnoreIndex));
  expected.backward();
  const torch::Tensor expected_per_token =
      F::cross_entropy(whole.detach(), targets(),
                       F::CrossEntropyFuncOptions().ignore_index(dtlab::model::kIgnoreIndex).reduction(torch::kNone));
  const int64_t padded = dtlab::tp::vocab_shard(kVocab, 0, tp).padded;
  // Padding columns get no gradient.
  const torch::Tensor expected_grad = torch::cat({whole.grad(), torch::zeros({kTokens, padded - kVocab})}, 1);
  run_ranks(tp, [&](Group& group) {
    const dtlab::tp::VocabShard shard = dtlab::tp::vocab_shard(kVocab, group.rank(), tp);
    const torch::Tensor local = padded_logits(tp).narrow(1, shard.start, shard.rows).clone().requires_grad_();
    const torch::Tensor per_token = dtlab::tp::vocab_parallel_cross_entropy(local, targets(), shard, group, "loss");
    EXPECT_LT(relative_difference(per_token, expected_per_token), 1e-6);
    const torch::Tensor loss = per_token.sum() / 10.0;  // 10 targets that are not ignored
    EXPECT_NEAR(loss.item<double>(), expected.item<double>(), 1e-6 * std::abs(expected.item<double>()));
    loss.backward();
    EXPECT_LT(relative_difference(local.grad(), expected_grad.narrow(1, shard.start, shard.rows)), 1e-6)
        << "rank " << group.rank() << "'s columns of d loss / d logits";
    // The logits stay where they are: three all-reduces of one float per token.
    EXPECT_EQ(all_reduce_count(group, "loss"), 3);
    EXPECT_EQ(group.log().bytes("all_reduce", "loss"), 3 * kTokens * 4);
    EXPECT_EQ(group.log().bytes("all_gather"), 0);
  });
}

TEST_P(VocabCrossEntropy, RefusesATargetOutsideTheVocabulary) {
  const int tp = GetParam();
  run_ranks(tp, [&](Group& group) {
    const dtlab::tp::VocabShard shard = dtlab::tp::vocab_shard(kVocab, group.rank(), tp);
    const torch::Tensor local = padded_logits(tp).narrow(1, shard.start, shard.rows);
    EXPECT_THROW(dtlab::tp::vocab_parallel_cross_entropy(local, torch::tensor({int64_t{3}, kVocab}, torch::kLong), shard,
                                                         group, "loss"),
                 dtlab::Error)
        << "id " << kVocab << " is padding, not a token";
  });
}

// The mistake of gathering the logits first: every rank then holds all of them, and the recipe's
// all-reduce of the sum of exps adds TP copies of the whole sum: log(TP * S) - log S = log TP,
// on every token, whatever the logits. (The max all-reduced over equal copies is unchanged, and
// the target's logit is read where it is, once.) A loss too high by exactly log TP is this.
TEST_P(VocabCrossEntropy, GatheredLogitsGiveALossOffByLogTP) {
  const int tp = GetParam();
  const torch::Tensor valid = targets().ne(dtlab::model::kIgnoreIndex);
  const torch::Tensor expected =
      F::cross_entropy(real_logits(), targets(), F::CrossEntropyFuncOptions().ignore_index(dtlab::model::kIgnoreIndex));
  run_ranks(tp, [&](Group& group) {
    const dtlab::tp::VocabShard shard = dtlab::tp::vocab_shard(kVocab, group.rank(), tp);
    const torch::Tensor local = padded_logits(tp).narrow(1, shard.start, shard.rows).contiguous();
    // Gathered: [N, padded] on every rank, padding columns dropped.
    const torch::Tensor gathered = torch::cat(group.all_gather(local, "gather logits"), 1).narrow(1, 0, kVocab);
    torch::Tensor max = std::get<0>(gathered.max(-1)).contiguous();
    group.all_reduce(max, dtlab::dist::ReduceOp::MAX, "max");
    torch::Tensor sum = (gathered - max.unsqueeze(-1)).exp().sum(-1);
    group.all_reduce(sum, dtlab::dist::ReduceOp::SUM, "sum of exps");
    const torch::Tensor target_logit =
        gathered.gather(1, targets().clamp_min(0).unsqueeze(-1)).squeeze(-1);
    const torch::Tensor per_token = (sum.log() + max - target_logit).masked_select(valid);
    const double loss = per_token.mean().item<double>();
    EXPECT_NEAR(loss - expected.item<double>(), std::log(double(tp)), 1e-5);
  });
}

INSTANTIATE_TEST_SUITE_P(TP, VocabCrossEntropy, ::testing::Values(2, 3));

// Two rows of 9 ids spread over the vocabulary (ids past 68 and 51 reach the last shards); the
// labels are the ids with one ignored.
torch::Tensor input_ids() {
  return torch::tensor({{0, 17, 34, 51, 68, 85, 100, 3, 50}, {99, 67, 33, 1, 66, 12, 45, 90, 100}}, torch::kLong);
}

torch::Tensor labels() {
  torch::Tensor l = input_ids().clone();
  l[1][4] = dtlab::model::kIgnoreIndex;
  return l;
}

class Gpt2 : public ::testing::TestWithParam<int> {};

TEST_P(Gpt2, LogitsLossAndEveryGradientEqualOneProcess) {
  const int tp = GetParam();
  dtlab::model::Gpt2LMHeadModel whole = dtlab::test::small_tp_gpt2();
  whole->eval();
  const dtlab::model::Gpt2Output expected = whole->forward(input_ids(), {}, labels());
  expected.loss.backward();
  std::map<std::string, torch::Tensor> expected_grads;
  for (const auto& p : whole->named_parameters()) expected_grads[p.key()] = p.value().grad().clone();
  const dtlab::model::Gpt2Config config = whole->config();

  run_ranks(tp, [&](Group& group) {
    dtlab::tp::TensorParallelGpt2 model(whole, group);
    const torch::Tensor logits = model->forward(input_ids());
    ASSERT_EQ(logits.size(-1), model->vocab().rows);
    const torch::Tensor loss = model->loss(logits, labels());
    loss.backward();
    // Megatron's communication: per block two all-reduces forward (g after each row-parallel
    // layer) and two backward (f before each column-parallel one); one for the embedding
    // (forward, g), one for the head (backward, f); three of one float per target token for the
    // loss. Nothing else: the logits never leave their rank.
    EXPECT_EQ(all_reduce_count(group, "tp layer"), 4 * config.n_layer);
    EXPECT_EQ(all_reduce_count(group, "tp embedding"), 1);
    EXPECT_EQ(all_reduce_count(group, "tp head"), 1);
    EXPECT_EQ(all_reduce_count(group, "tp loss"), 3);
    EXPECT_EQ(group.log().bytes("all_reduce", "tp loss"), 3 * (2 * 8) * 4) << "[N] floats, N = 2 rows of 8 targets";
    EXPECT_EQ(static_cast<int64_t>(group.log().records().size()), 4 * config.n_layer + 5);

    // Logits, gathered for the test only.
    const torch::Tensor gathered =
        torch::cat(group.all_gather(logits.detach().contiguous(), "test gather"), -1).narrow(-1, 0, kVocab);
    EXPECT_LT(relative_difference(gathered, expected.logits), 1e-5);
    EXPECT_NEAR(loss.item<double>(), expected.loss.item<double>(), 1e-5 * std::abs(expected.loss.item<double>()));

    int replicated = 0, split = 0;
    for (const auto& p : model->named_parameters()) {
      const std::string name = hf_name(p.key());
      ASSERT_TRUE(p.value().grad().defined()) << name << " got no gradient";
      const torch::Tensor mine = p.value().grad();
      const torch::Tensor theirs = dtlab::tp::shard_of(name, expected_grads.at(name), config, group.rank(), tp);
      ASSERT_EQ(mine.sizes(), theirs.sizes()) << name;
      EXPECT_LT(relative_difference(mine, theirs), 1e-5) << name << " on rank " << group.rank();
      if (dtlab::tp::is_replicated(name)) {
        ++replicated;
        // Every rank's copy of a replicated parameter must get the same gradient, or the copies
        // drift apart at the first update.
        const std::vector<torch::Tensor> copies = group.all_gather(mine.contiguous(), "test replicas");
        for (int r = 1; r < tp; ++r) {
          EXPECT_LT(relative_difference(copies[r], copies[0]), 1e-6) << name << ": rank " << r << " against rank 0";
        }
      } else {
        ++split;
      }
    }
    EXPECT_EQ(replicated, 1 + 2 * 6 + 2) << "wpe, each block's 2 layer norms and 2 row-parallel biases, ln_f";
    EXPECT_EQ(split, 1 + 2 * 6) << "wte, each block's c_attn weight and bias, c_proj weight, c_fc weight and bias, mlp c_proj weight";
    // The padding rows of wte: never looked up, their logits never counted, so no gradient.
    const dtlab::tp::VocabShard& shard = model->vocab();
    if (shard.end() > kVocab) {
      const torch::Tensor wte_grad = model->named_parameters()["transformer/wte/weight"].grad();
      EXPECT_TRUE(torch::equal(wte_grad.narrow(0, kVocab - shard.start, shard.end() - kVocab),
                               torch::zeros({shard.end() - kVocab, config.n_embd})));
    }
  });
}

INSTANTIATE_TEST_SUITE_P(TP, Gpt2, ::testing::Values(2, 3));

TEST(Gpt2Refusal, ATPThatDoesNotDivideTheHeadsIsNamed) {
  dtlab::model::Gpt2LMHeadModel whole = dtlab::test::small_tp_gpt2();
  run_ranks(4, [&](Group& group) {
    try {
      dtlab::tp::TensorParallelGpt2 model(whole, group);
      ADD_FAILURE() << "TP 4 with 6 heads was accepted";
    } catch (const dtlab::Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("of 4 does not divide GPT-2's 6 attention heads"), std::string::npos) << what;
    }
  });
}

}  // namespace tp_test
