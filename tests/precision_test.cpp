// precision (dtlab/tasks/precision.h) with the reference, in one process and on thread ranks: a
// checkpointed GPT-2 block against the block itself with dropout on, bit for bit, its forwards
// and the bytes it keeps; the masters' gradients summed in fp32; the loss scaler's agreement
// across ranks, its rule and its unscale. The grader's checks run the same parts end to end.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/types.h>

#include <cmath>
#include <limits>
#include <vector>

#include "dist_test_util.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/report/tensor_bytes.h"
#include "dtlab/tasks/precision.h"

namespace {

using dtlab::precision::BlockForward;
using dtlab::precision::CheckpointedBlock;

dtlab::model::Gpt2Config dropout_config() {
  dtlab::model::Gpt2Config c;
  c.vocab_size = 64;
  c.n_positions = 16;
  c.n_embd = 32;
  c.n_layer = 1;
  c.n_head = 4;
  c.resid_pdrop = c.embd_pdrop = c.attn_pdrop = 0.1;
  return c;
}

torch::Tensor generator_state() {
  at::Generator g = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.get_state();
}

struct BlockRun {
  torch::Tensor output, input_grad, generator_after;
  std::vector<torch::Tensor> parameter_grads;
};

// The block on one input under seed 7, then a loss that weighs every output, backward, and a draw
// afterwards (what training would draw next).
BlockRun run_block(dtlab::model::Gpt2Block block, bool checkpointed, int* forwards) {
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({2, 8, 32}).requires_grad_(true);
  const torch::Tensor weights = torch::randn({2, 8, 32});
  block->zero_grad(/*set_to_none=*/true);
  const BlockForward forward = [&](const torch::Tensor& h) {
    ++*forwards;
    return block->forward(h, torch::Tensor());
  };
  torch::manual_seed(7);
  const torch::Tensor y = checkpointed ? CheckpointedBlock::apply(&forward, x) : forward(x);
  (y * weights).sum().backward();
  BlockRun run{y.detach(), x.grad(), generator_state(), {}};
  for (const torch::Tensor& p : block->parameters()) run.parameter_grads.push_back(p.grad());
  return run;
}

TEST(CheckpointedBlock, EqualsTheBlockBitForBitWithDropout) {
  torch::manual_seed(1);
  dtlab::model::Gpt2Block block(dropout_config(), 0);
  block->train();
  int plain_forwards = 0, checkpointed_forwards = 0;
  const BlockRun plain = run_block(block, false, &plain_forwards);
  const BlockRun ckpt = run_block(block, true, &checkpointed_forwards);
  EXPECT_EQ(plain_forwards, 1);
  EXPECT_EQ(checkpointed_forwards, 2);  // once without a graph, once in backward
  EXPECT_TRUE(torch::equal(plain.output, ckpt.output));
  EXPECT_TRUE(torch::equal(plain.input_grad, ckpt.input_grad));
  ASSERT_EQ(plain.parameter_grads.size(), ckpt.parameter_grads.size());
  for (size_t i = 0; i < plain.parameter_grads.size(); ++i) {
    EXPECT_TRUE(torch::equal(plain.parameter_grads[i], ckpt.parameter_grads[i])) << "parameter " << i;
  }
  // After backward the generator is where the plain run left it: later masks do not move.
  EXPECT_TRUE(torch::equal(plain.generator_after, ckpt.generator_after));
  // Dropout was on: the masks matter (a run under another seed differs).
  torch::manual_seed(8);
  const torch::Tensor other = block->forward(torch::randn({2, 8, 32}), torch::Tensor());
  EXPECT_FALSE(torch::equal(other, plain.output));
}

TEST(CheckpointedBlock, KeepsOnlyItsOutputAndTheGeneratorState) {
  dtlab::report::TensorBytes& meter = dtlab::report::TensorBytes::install();
  torch::manual_seed(1);
  dtlab::model::Gpt2Block block(dropout_config(), 0);
  block->train();
  const torch::Tensor x = torch::randn({2, 8, 32}).requires_grad_(true);
  int forwards = 0;
  const BlockForward forward = [&](const torch::Tensor& h) {
    ++forwards;
    return block->forward(h, torch::Tensor());
  };
  const int64_t before = meter.current();
  torch::Tensor plain = forward(x);
  const int64_t kept_plain = meter.current() - before;
  plain = torch::Tensor();
  const int64_t before_ckpt = meter.current();
  const torch::Tensor y = CheckpointedBlock::apply(&forward, x);
  const int64_t kept = meter.current() - before_ckpt;
  EXPECT_EQ(kept, static_cast<int64_t>(y.nbytes()) + generator_state().nbytes());
  EXPECT_GT(kept_plain, 5 * kept);  // every activation of the block, against its output
}

TEST(MixedPrecision, RefreshRoundsTheCopyAndLeavesTheMasters) {
  const torch::Tensor master = torch::tensor({1.0f + std::ldexp(1.0f, -12), 3.0f});
  const torch::Tensor before = master.clone();
  const torch::Tensor compute = torch::zeros({2}, torch::kBFloat16);
  dtlab::precision::refresh_compute_weights({master}, {compute});
  EXPECT_TRUE(torch::equal(master, before));
  EXPECT_TRUE(torch::equal(compute, before.to(torch::kBFloat16)));
}

TEST(MixedPrecision, SumsMicroBatchesInFp32) {
  // 1 + 2^-9 is not a bf16 number (8 bits of mantissa): summed in bf16 the small part is lost.
  const torch::Tensor master = torch::zeros({1}).requires_grad_(true);
  const torch::Tensor compute = torch::zeros({1}, torch::kBFloat16).requires_grad_(true);
  for (const float g : {1.0f, std::ldexp(1.0f, -9)}) {
    compute.mutable_grad() = torch::full({1}, g, torch::kBFloat16);
    dtlab::precision::accumulate_master_gradients({compute}, {master});
    EXPECT_EQ(compute.grad().item<float>(), 0.0f);  // the next micro-batch starts from zero
  }
  EXPECT_EQ(master.grad().scalar_type(), torch::kFloat32);
  EXPECT_EQ(master.grad().item<float>(), 1.0f + std::ldexp(1.0f, -9));
}

TEST(LossScaler, FollowsTheRule) {
  dtlab::precision::LossScalerOptions o;
  o.initial_scale = 1024;
  o.growth_interval = 2;
  dtlab::precision::DynamicLossScaler s(o);
  EXPECT_EQ(s.scale(), 1024);
  s.update(false);
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.good_steps(), 1);
  s.update(false);
  EXPECT_EQ(s.scale(), 2048);  // two good steps in a row
  EXPECT_EQ(s.good_steps(), 0);
  s.update(false);
  s.update(true);  // an overflow halves and starts the count again
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.good_steps(), 0);
  s.update(false);
  EXPECT_EQ(s.scale(), 1024);
}

TEST(LossScaler, UnscalesTheSum) {
  dtlab::precision::LossScalerOptions o;
  o.initial_scale = 512;
  dtlab::precision::DynamicLossScaler s(o);
  const torch::Tensor master = torch::zeros({2}).requires_grad_(true);
  master.mutable_grad() = torch::zeros({2});
  s.unscale({torch::tensor({512.0f, -1024.0f}).to(torch::kHalf)}, {master});
  EXPECT_TRUE(torch::equal(master.grad(), torch::tensor({1.0f, -2.0f})));
}

TEST(LossScaler, EveryRankDecidesWhatAnyRankFound) {
  for (const int bad : {-1, 0, 1}) {
    std::vector<int> decided(2, -1);
    dtlab::test::run_ranks(2, [&](dtlab::dist::Group& group) {
      dtlab::precision::DynamicLossScaler s({});
      torch::Tensor g = torch::ones({4}, torch::kHalf);
      if (group.rank() == bad) g[2] = std::numeric_limits<float>::infinity();
      decided[group.rank()] = s.found_overflow({torch::ones({3}, torch::kHalf), g}, group) ? 1 : 0;
    });
    EXPECT_EQ(decided[0], bad >= 0 ? 1 : 0) << "inf on rank " << bad;
    EXPECT_EQ(decided[1], bad >= 0 ? 1 : 0) << "inf on rank " << bad;
  }
}

}  // namespace
