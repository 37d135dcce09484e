// run_glue's optimiser: AdamW with two parameter groups (no weight decay on biases and LayerNorm
// weights) and get_linear_schedule_with_warmup.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/optim/sgd.h>

#include "dtlab/core/error.h"
#include "dtlab/model/bert.h"
#include "dtlab/train/optimizer.h"
#include "test_util.h"

// Everything in a namespace named after the file (no anonymous namespace): the unit suites share
// one binary, compiled in groups of files (Note [Unity builds] in cmake/Dtlab.cmake), so helpers
// must not collide, and a TEST_F class must not derive from a type of an anonymous namespace.
namespace schedule_test {

using dtlab::train::LinearWarmupSchedule;
using dtlab::train::OptimizerOptions;

// A module with one weight (decayed: a 1 x 3 matrix, two dimensions) and one bias (not decayed:
// one dimension), named as run_glue sees them.
struct TwoTensorsImpl : torch::nn::Module {
  TwoTensorsImpl() {
    weight = register_parameter("weight", torch::tensor({{1.0f, -2.0f, 3.0f}}));
    bias = register_parameter("bias", torch::tensor({0.5f}));
  }
  torch::Tensor weight, bias;
};
TORCH_MODULE(TwoTensors);

OptimizerOptions optimizer_options(double lr, double weight_decay = 0.0) {
  OptimizerOptions o;
  o.learning_rate = lr;
  o.weight_decay = weight_decay;
  return o;
}

std::vector<double> group_lrs(const torch::optim::Optimizer& optimizer) {
  std::vector<double> lrs;
  for (const auto& g : optimizer.param_groups()) lrs.push_back(g.options().get_lr());
  return lrs;
}

// Hugging Face's get_linear_schedule_with_warmup lr_lambda, transcribed:
//   if step < W: return step / max(1, W)
//   return max(0.0, (T - step) / max(1, T - W))
double hf_factor(int64_t step, int64_t warmup, int64_t total) {
  if (step < warmup) return double(step) / double(std::max<int64_t>(1, warmup));
  return std::max(0.0, double(total - step) / double(std::max<int64_t>(1, total - warmup)));
}

dtlab::model::BertConfig tiny_config() {
  dtlab::model::BertConfig c;
  c.vocab_size = 20;
  c.hidden_size = 8;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.intermediate_size = 16;
  c.max_position_embeddings = 16;
  c.type_vocab_size = 2;
  c.num_labels = 2;
  return c;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int64_t numel(const std::vector<torch::Tensor>& params) {
  int64_t n = 0;
  for (const auto& p : params) n += p.numel();
  return n;
}

// ---------------------------------------------------------------------------------------------
// LinearWarmupSchedule

TEST(LinearWarmupSchedule, WithoutWarmupFallsLinearlyFromTheBaseRateToZeroAtTotalSteps) {
  TwoTensors m;
  auto optimizer = dtlab::train::make_adamw(*m, optimizer_options(0.1));
  const int64_t total = 10;
  LinearWarmupSchedule schedule(*optimizer, 0, total);
  // Set at construction, like LambdaLR: step 0 runs at the full base rate.
  EXPECT_DOUBLE_EQ(schedule.last_lr(), 0.1);
  for (int64_t k = 1; k <= total + 3; ++k) {
    schedule.step();
    EXPECT_EQ(schedule.steps_taken(), k);
    // lr(k) = base * (T - k) / T, clamped at 0 after T.
    const double expected = k <= total ? 0.1 * double(total - k) / double(total) : 0.0;
    EXPECT_NEAR(schedule.last_lr(), expected, 1e-15) << "step " << k;
  }
}

TEST(LinearWarmupSchedule, WarmupRisesAsBaseTimesStepOverWarmupThenFalls) {
  TwoTensors m;
  auto optimizer = dtlab::train::make_adamw(*m, optimizer_options(2e-3));
  const int64_t warmup = 4, total = 12;
  LinearWarmupSchedule schedule(*optimizer, warmup, total);
  EXPECT_DOUBLE_EQ(schedule.last_lr(), 0.0);  // step 0 of warmup: 0 / W
  for (int64_t k = 1; k <= total; ++k) {
    schedule.step();
    // Warmup: base * k / W (peak base at k = W); then base * (T - k) / (T - W).
    const double expected =
        k < warmup ? 2e-3 * double(k) / warmup : 2e-3 * double(total - k) / double(total - warmup);
    EXPECT_NEAR(schedule.last_lr(), expected, 1e-15) << "step " << k;
  }
  EXPECT_DOUBLE_EQ(schedule.last_lr(), 0.0);
}

TEST(LinearWarmupSchedule, FactorMatchesGetLinearScheduleWithWarmup) {
  TwoTensors m;
  auto optimizer = dtlab::train::make_adamw(*m, optimizer_options(1.0));
  // W=3, T=7: 0, 1/3, 2/3 while warming up, then (7 - s) / 4: 1, 3/4, 1/2, 1/4, 0, then 0.
  LinearWarmupSchedule schedule(*optimizer, 3, 7);
  const double expected[] = {0.0, 1.0 / 3, 2.0 / 3, 1.0, 0.75, 0.5, 0.25, 0.0, 0.0, 0.0};
  for (int64_t s = 0; s < 10; ++s) EXPECT_NEAR(schedule.factor(s), expected[s], 1e-15) << "step " << s;
  // And the transcription of Hugging Face's lambda on a grid, including W >= T and W = 1.
  for (int64_t w : {0, 1, 5, 20}) {
    for (int64_t t : {1, 10, 20}) {
      LinearWarmupSchedule s(*optimizer, w, t);
      for (int64_t step = 0; step <= 25; ++step) {
        EXPECT_DOUBLE_EQ(s.factor(step), hf_factor(step, w, t)) << "W=" << w << " T=" << t;
      }
    }
  }
}

TEST(LinearWarmupSchedule, EveryParamGroupFollowsItsOwnBaseRate) {
  TwoTensors m;
  auto optimizer = dtlab::train::make_adamw(*m, optimizer_options(0.4, 0.01));
  ASSERT_EQ(optimizer->param_groups().size(), 2u);
  LinearWarmupSchedule schedule(*optimizer, 2, 6);
  EXPECT_EQ(group_lrs(*optimizer), (std::vector<double>{0.0, 0.0}));
  schedule.step();  // 0.4 * 1/2
  EXPECT_EQ(group_lrs(*optimizer), (std::vector<double>{0.2, 0.2}));
  schedule.step();  // peak: 0.4 * (6 - 2) / 4
  EXPECT_EQ(group_lrs(*optimizer), (std::vector<double>{0.4, 0.4}));
  schedule.step();  // 0.4 * 3/4
  EXPECT_EQ(group_lrs(*optimizer), (std::vector<double>{0.4 * 0.75, 0.4 * 0.75}));

  // Groups with different base rates keep their ratio (LambdaLR multiplies each base_lr).
  torch::Tensor a = torch::zeros({1}, torch::requires_grad()), b = torch::zeros({1}, torch::requires_grad());
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{a}, std::make_unique<torch::optim::SGDOptions>(1.0));
  groups.emplace_back(std::vector<torch::Tensor>{b}, std::make_unique<torch::optim::SGDOptions>(3.0));
  torch::optim::SGD sgd(groups, torch::optim::SGDOptions(1.0));
  LinearWarmupSchedule two(sgd, 0, 4);
  two.step();  // factor 3/4
  EXPECT_EQ(group_lrs(sgd), (std::vector<double>{0.75, 2.25}));
}

TEST(LinearWarmupSchedule, NegativeWarmupIsAnError) {
  TwoTensors m;
  auto optimizer = dtlab::train::make_adamw(*m, optimizer_options(0.1));
  EXPECT_THROW_WITH(LinearWarmupSchedule(*optimizer, -1, 10), dtlab::Error, "--warmup_steps");
}

// ---------------------------------------------------------------------------------------------
// make_adamw

TEST(MakeAdamW, ExemptionByDimensionIsExactlyRunGluesNamedSetForBert) {
  torch::manual_seed(0);
  dtlab::model::BertForSequenceClassification model(tiny_config());
  auto optimizer = dtlab::train::make_adamw(*model, optimizer_options(3e-5, 0.01));
  const auto& groups = optimizer->param_groups();
  ASSERT_EQ(groups.size(), 2u);
  const auto& decay = groups[0].params();
  const auto& no_decay = groups[1].params();

  // Tiny BERT (V=20, H=8, P=16, types 2, I=16, 1 layer, 2 labels), Hugging Face's parameters:
  //   decayed weights: word/position/type embeddings, query/key/value, attention.output.dense,
  //   intermediate.dense, output.dense, pooler.dense, classifier = 11 tensors of
  //   20*8 + 16*8 + 2*8 + 3*8*8 + 8*8 + 16*8 + 8*16 + 8*8 + 2*8 = 896 numbers;
  //   no decay: 3 LayerNorms (weight and bias, 8 each), 8 biases (q, k, v, attention.output.dense
  //   and output.dense, pooler: 8 each; intermediate: 16; classifier: 2) = 14 tensors of
  //   6*8 + 6*8 + 16 + 2 = 114 numbers.
  EXPECT_EQ(decay.size(), 11u);
  EXPECT_EQ(numel(decay), 896);
  EXPECT_EQ(no_decay.size(), 14u);
  EXPECT_EQ(numel(no_decay), 114);
  EXPECT_EQ(numel(decay) + numel(no_decay), numel(model->parameters()));

  // By name: every tensor in exactly the group run_glue.py's names put it in (the kit's rule is
  // "fewer than two dimensions"; for BERT the two rules must pick the same set).
  std::set<const void*> decay_ptrs, no_decay_ptrs;
  for (const auto& p : decay) decay_ptrs.insert(p.unsafeGetTensorImpl());
  for (const auto& p : no_decay) no_decay_ptrs.insert(p.unsafeGetTensorImpl());
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    const bool exempt = ends_with(name, "bias") || ends_with(name, "LayerNorm.weight");
    const void* impl = item.value().unsafeGetTensorImpl();
    EXPECT_EQ(no_decay_ptrs.count(impl), exempt ? 1u : 0u) << name;
    EXPECT_EQ(decay_ptrs.count(impl), exempt ? 0u : 1u) << name;
  }

  auto& decay_options = static_cast<const torch::optim::AdamWOptions&>(groups[0].options());
  auto& no_decay_options = static_cast<const torch::optim::AdamWOptions&>(groups[1].options());
  EXPECT_DOUBLE_EQ(decay_options.weight_decay(), 0.01);
  EXPECT_DOUBLE_EQ(no_decay_options.weight_decay(), 0.0);
  for (const auto* o : {&decay_options, &no_decay_options}) {
    EXPECT_DOUBLE_EQ(o->lr(), 3e-5);
    EXPECT_DOUBLE_EQ(o->eps(), 1e-8);
  }
}

// GPT-2's LayerNorms are "ln_1", "ln_2", "ln_f": a rule by BERT's names would decay them. The
// rule by dimension does not, whatever the names.
TEST(MakeAdamW, Gpt2StyleNormWeightsAndBiasesAreExemptWhateverTheirNames) {
  struct Gpt2LikeImpl : torch::nn::Module {
    Gpt2LikeImpl() {
      register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({4})));
      register_module("c_attn", torch::nn::Linear(4, 12));
      register_module("wte", torch::nn::Embedding(10, 4));
    }
  };
  auto m = std::make_shared<Gpt2LikeImpl>();
  auto optimizer = dtlab::train::make_adamw(*m, optimizer_options(1e-4, 0.1));
  const auto& groups = optimizer->param_groups();
  EXPECT_EQ(numel(groups[0].params()), 4 * 12 + 10 * 4);  // c_attn.weight, wte.weight
  EXPECT_EQ(numel(groups[1].params()), 4 + 4 + 12);       // ln_1.weight, ln_1.bias, c_attn.bias
}

TEST(MakeAdamW, NonPositiveLearningRateOrNegativeWeightDecayIsAnError) {
  TwoTensors m;
  EXPECT_THROW_WITH(dtlab::train::make_adamw(*m, optimizer_options(0.0)), dtlab::Error,
                    "--learning_rate");
  EXPECT_THROW_WITH(dtlab::train::make_adamw(*m, optimizer_options(-1e-5)), dtlab::Error,
                    "--learning_rate");
  EXPECT_THROW_WITH(dtlab::train::make_adamw(*m, optimizer_options(std::nan(""))), dtlab::Error,
                    "--learning_rate");
  EXPECT_THROW_WITH(dtlab::train::make_adamw(*m, optimizer_options(1e-5, -0.01)), dtlab::Error,
                    "--weight_decay");
  EXPECT_NO_THROW(dtlab::train::make_adamw(*m, optimizer_options(1e-5, 0.0)));
}

TEST(MakeAdamW, TwoStepsEqualPyTorchAdamWWithRunGlueGroups) {
  // Expected values from PyTorch 1.13 (.venv-golden):
  //   w = torch.nn.Parameter(torch.tensor([1.0, -2.0, 3.0])); b = torch.nn.Parameter(torch.tensor([0.5]))
  //   opt = torch.optim.AdamW([{'params': [w], 'weight_decay': 0.01},
  //                            {'params': [b], 'weight_decay': 0.0}], lr=0.1, eps=1e-8)
  //   for _ in range(2):
  //       opt.zero_grad(); ((w**2).sum() + (b**3).sum()).backward(); opt.step()
  //   print(['%.9g' % x for x in w.tolist()], ['%.9g' % x for x in b.tolist()])
  // (After step 1 alone, closed form: m_hat / sqrt(v_hat) = sign(g), so w = w0 * (1 - 0.1 * 0.01)
  // - 0.1 * sign(2 w0) = [0.899, -1.898, 2.897] and b = 0.5 - 0.1 = 0.4.)
  TwoTensors m;
  auto optimizer = dtlab::train::make_adamw(*m, optimizer_options(0.1, 0.01));
  for (int step = 1; step <= 2; ++step) {
    optimizer->zero_grad();
    (m->weight.pow(2).sum() + m->bias.pow(3).sum()).backward();
    optimizer->step();
    if (step == 1) {
      const torch::Tensor w1 = m->weight.detach().reshape(-1);
      EXPECT_NEAR(w1[0].item<float>(), 0.899f, 1e-6);
      EXPECT_NEAR(w1[1].item<float>(), -1.898f, 1e-6);
      EXPECT_NEAR(w1[2].item<float>(), 2.897f, 1e-6);
      EXPECT_NEAR(m->bias[0].item<float>(), 0.4f, 1e-6);
    }
  }
  const torch::Tensor w = m->weight.detach().reshape(-1);
  EXPECT_NEAR(w[0].item<float>(), 0.798519075f, 1e-6);
  EXPECT_NEAR(w[1].item<float>(), -1.79627264f, 1e-6);
  EXPECT_NEAR(w[2].item<float>(), 2.79420924f, 1e-6);
  EXPECT_NEAR(m->bias.detach()[0].item<float>(), 0.303443909f, 1e-6);
}

}  // namespace schedule_test
