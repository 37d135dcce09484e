// The kit's AdamW (Note [AdamW in one pass], train/optimizer.h) against LibTorch's
// torch::optim::AdamW: the same parameters, moments and step counts after many steps with weight
// decay, changing learning rates and a parameter without gradient; one optimiser state for both
// implementations; the loop really replaces the nine operators, and a parameter it cannot take
// hands the step to LibTorch.
#include <gtest/gtest.h>

#include <ATen/record_function.h>
#include <c10/util/string_utils.h>
#include <torch/optim/adamw.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "dtlab/core/libtorch_compat.h"
#include "dtlab/model/ops.h"
#include "dtlab/train/adamw_kernel.h"
#include "dtlab/train/optimizer.h"

namespace adamw_test {

using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;

// Parameters of several kinds: a decayed matrix larger than the loop's grain (77100 elements, so
// at::parallel_for splits it), an undecayed vector, a decayed matrix of `third` (float: the loop
// takes it; double: it does not), and one that never gets a gradient.
std::vector<torch::Tensor> make_parameters(torch::ScalarType third = torch::kFloat) {
  torch::manual_seed(11);
  return {torch::randn({257, 300}), torch::randn({300}), torch::randn({7, 5}, third), torch::randn({4})};
}

std::vector<torch::Tensor> copies(const std::vector<torch::Tensor>& ps) {
  std::vector<torch::Tensor> out;
  for (const auto& p : ps) out.push_back(p.clone().set_requires_grad(true));
  return out;
}

std::vector<torch::optim::OptimizerParamGroup> groups(const std::vector<torch::Tensor>& ps) {
  std::vector<torch::optim::OptimizerParamGroup> g;
  g.emplace_back(std::vector<torch::Tensor>{ps[0], ps[2]},
                 std::make_unique<AdamWOptions>(AdamWOptions(2e-3).eps(1e-8).weight_decay(0.01)));
  g.emplace_back(std::vector<torch::Tensor>{ps[1], ps[3]},
                 std::make_unique<AdamWOptions>(AdamWOptions(2e-3).eps(1e-8).weight_decay(0.0)));
  return g;
}

// Gradients of step `step`, the same for both optimisers; the last parameter gets none.
void set_gradients(std::vector<torch::Tensor>& ps, int step) {
  torch::manual_seed(1000 + step);
  for (size_t i = 0; i + 1 < ps.size(); ++i) ps[i].mutable_grad() = torch::randn_like(ps[i]) * (0.1 * (i + 1));
}

void set_lr(torch::optim::Optimizer& o, double lr) {
  for (auto& g : o.param_groups()) g.options().set_lr(lr);
}

const AdamWParamState& state_of(const torch::optim::Optimizer& o, const torch::Tensor& p) {
  return static_cast<const AdamWParamState&>(*o.state().at(dtlab::compat::optimizer_state_key(p)));
}

double max_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

// Largest difference over the largest magnitude: a few units in the last place of float where
// only the rounding differs (~1e-7), 1e-4 and more for any change of the formula.
double relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return max_difference(a, b) / b.to(torch::kDouble).abs().max().item<double>();
}

void expect_same_optimisers(const std::vector<torch::Tensor>& kit, const torch::optim::Optimizer& kit_opt,
                            const std::vector<torch::Tensor>& ref, const torch::optim::Optimizer& ref_opt) {
  for (size_t i = 0; i < kit.size(); ++i) {
    SCOPED_TRACE("parameter " + std::to_string(i));
    EXPECT_LT(relative_difference(kit[i], ref[i]), 1e-6);
    const bool has_state = kit_opt.state().count(dtlab::compat::optimizer_state_key(kit[i])) > 0;
    ASSERT_EQ(has_state, ref_opt.state().count(dtlab::compat::optimizer_state_key(ref[i])) > 0);
    if (!has_state) continue;
    const auto &a = state_of(kit_opt, kit[i]), &b = state_of(ref_opt, ref[i]);
    EXPECT_EQ(a.step(), b.step());
    EXPECT_LT(relative_difference(a.exp_avg(), b.exp_avg()), 1e-6);
    EXPECT_LT(relative_difference(a.exp_avg_sq(), b.exp_avg_sq()), 1e-6);
  }
}

// Counts the aten operators the current thread runs while it lives.
class OperatorCounter {
 public:
  OperatorCounter() {
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback(
            [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
              ++counts()[fn.name()];
              return nullptr;
            })
            .scopes({at::RecordScope::FUNCTION}));
    counts().clear();
  }
  ~OperatorCounter() { at::removeCallback(handle_); }
  int operator[](const std::string& name) const { return counts().count(name) ? counts().at(name) : 0; }

 private:
  static std::map<std::string, int>& counts() {
    static thread_local std::map<std::string, int> c;
    return c;
  }
  at::CallbackHandle handle_;
};

// The same parameters and gradients under the kit's AdamW and under LibTorch's.
struct SideBySide {
  explicit SideBySide(torch::ScalarType third = torch::kFloat) : initial(make_parameters(third)) {}
  std::vector<torch::Tensor> initial;
  std::vector<torch::Tensor> kit = copies(initial), ref = copies(initial);
  dtlab::train::AdamW kit_opt{groups(kit), AdamWOptions(2e-3)};
  torch::optim::AdamW ref_opt{groups(ref), AdamWOptions(2e-3)};

  // Step `step`'s gradients on both sides, then step_kit(kit_opt) and LibTorch's step.
  template <typename StepKit>
  void step(int step, double lr, StepKit step_kit) {
    set_lr(kit_opt, lr);
    set_lr(ref_opt, lr);
    set_gradients(kit, step);
    set_gradients(ref, step);
    step_kit(kit_opt);
    ref_opt.step();
  }
};

// Note [AdamW in one pass]: the loop rounds after every operation, in LibTorch's order. A compiler
// that contracts a multiply and an add into one fused instruction (GCC does by default wherever
// the target has FMA: aarch64, or x86-64 with -march=haswell and later) rounds once instead, and
// the kernel would then differ from this reference in the last place of many elements; so
// adamw_kernel.cpp is compiled with -ffp-contract=off (common/CMakeLists.txt). The reference
// stores every intermediate in a volatile float, which no compiler may fuse across.
TEST(KitAdamW, TheLoopRoundsEveryOperationAsWrittenWithNoFusedMultiplyAdd) {
  constexpr int64_t n = 4096;
  std::mt19937 gen(27);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> p(n), g(n), m(n), v(n);
  for (int64_t i = 0; i < n; ++i) {
    p[i] = normal(gen);
    g[i] = normal(gen) * 1e-2f;
    m[i] = normal(gen) * 1e-3f;
    v[i] = std::abs(normal(gen)) * 1e-5f;
  }
  dtlab::train::AdamWConstants c;
  c.keep = 1.0f - 2e-3f * 0.01f;
  c.beta1 = 0.9f;
  c.one_minus_beta1 = 1.0f - 0.9f;
  c.beta2 = 0.999f;
  c.one_minus_beta2 = 1.0f - 0.999f;
  c.sqrt_bias_correction2 = 0.0447f;
  c.eps = 1e-8f;
  c.minus_step_size = -2e-3f / 0.19f;
  std::vector<float> want_p(n), want_m(n), want_v(n);
  for (int64_t i = 0; i < n; ++i) {
    volatile float m_decayed = m[i] * c.beta1, m_new = c.one_minus_beta1 * g[i];
    volatile float mi = m_decayed + m_new;
    volatile float g_scaled = c.one_minus_beta2 * g[i], g_squared = g_scaled * g[i], v_decayed = v[i] * c.beta2;
    volatile float vi = v_decayed + g_squared;
    volatile float root = std::sqrt(static_cast<float>(vi)), scaled_root = root / c.sqrt_bias_correction2;
    volatile float denom = scaled_root + c.eps;
    volatile float step = c.minus_step_size * mi, update = step / denom, p_kept = p[i] * c.keep;
    want_p[i] = p_kept + update;
    want_m[i] = mi;
    want_v[i] = vi;
  }
  dtlab::train::adamw_update(p.data(), g.data(), m.data(), v.data(), 0, n, c);
  int64_t differ = 0;
  for (int64_t i = 0; i < n; ++i) {
    differ += std::memcmp(&p[i], &want_p[i], sizeof(float)) != 0 || std::memcmp(&m[i], &want_m[i], sizeof(float)) != 0 ||
              std::memcmp(&v[i], &want_v[i], sizeof(float)) != 0;
  }
  EXPECT_EQ(differ, 0) << "of " << n << " elements differ from one rounding per operation: was adamw_kernel.cpp "
                       << "compiled without -ffp-contract=off on a target with fused multiply-add?";
}

TEST(KitAdamW, EqualsLibTorchsAdamWOverManySteps) {
  SideBySide s;
  for (int step = 0; step < 40; ++step) {
    const double lr = 2e-3 * (1.0 - step / 50.0);  // as a linear schedule moves it
    s.step(step, lr, [](dtlab::train::AdamW& o) { o.step(); });
  }
  expect_same_optimisers(s.kit, s.kit_opt, s.ref, s.ref_opt);
  // The parameters moved (each step moves each element by about lr, in a random direction here):
  // equal because both updated, not because neither did; the one without a gradient did not move.
  EXPECT_GT(max_difference(s.kit[0], s.initial[0]), 0.01);
  EXPECT_GT(max_difference(s.kit[1], s.initial[1]), 0.01);
  EXPECT_TRUE(torch::equal(s.kit[3], s.initial[3]));
}

TEST(KitAdamW, OneStateForBothImplementations) {
  // Three steps of the kit's, then three of LibTorch's step on the same optimiser: equal to six
  // of LibTorch's. Each reads the moments and step count the other left.
  SideBySide s;
  for (int step = 0; step < 6; ++step) {
    s.step(step, 2e-3, [&](dtlab::train::AdamW& o) {
      if (step < 3) {
        o.step();
      } else {
        o.torch::optim::AdamW::step();
      }
    });
  }
  expect_same_optimisers(s.kit, s.kit_opt, s.ref, s.ref_opt);
}

TEST(KitAdamW, OneLoopInsteadOfNineOperators) {
  auto ps = copies(make_parameters());
  set_gradients(ps, 0);
  std::vector<torch::optim::OptimizerParamGroup> floats_only;
  floats_only.emplace_back(std::vector<torch::Tensor>{ps[0], ps[1]},
                           std::make_unique<AdamWOptions>(AdamWOptions(1e-3).weight_decay(0.01)));
  dtlab::train::AdamW kit_opt(std::move(floats_only), AdamWOptions(1e-3));
  kit_opt.step();  // creates the moments (zeros_like): not counted
  {
    OperatorCounter count;
    kit_opt.step();
    EXPECT_EQ(count["dtlab::adamw_update"], 2);  // one loop per parameter
    EXPECT_EQ(count["aten::addcdiv_"], 0);
    EXPECT_EQ(count["aten::sqrt"], 0);
  }
  // --plain (model/ops.h) takes LibTorch's step: its operators show.
  dtlab::model::use_ops(dtlab::model::Ops::plain);
  {
    OperatorCounter count;
    kit_opt.step();
    EXPECT_EQ(count["aten::addcdiv_"], 2);
  }
  dtlab::model::use_ops(dtlab::model::Ops::kit);
}

TEST(KitAdamW, AParameterTheLoopCannotTakeHandsTheStepToLibTorch) {
  // A double parameter: the whole step is LibTorch's (its operators run, no loop), and the two
  // optimisers stay equal to the bit.
  SideBySide s(torch::kDouble);
  for (int step = 0; step < 3; ++step) {
    s.step(step, 2e-3, [](dtlab::train::AdamW& o) {
      OperatorCounter count;
      o.step();
      EXPECT_EQ(count["dtlab::adamw_update"], 0);
      EXPECT_EQ(count["aten::addcdiv_"], 3);  // the three parameters with gradients
    });
  }
  for (size_t i = 0; i < s.kit.size(); ++i) EXPECT_TRUE(torch::equal(s.kit[i], s.ref[i])) << "parameter " << i;
}

TEST(KitAdamW, AutogradSeesTheUpdateAsInPlace) {
  // A graph that saved a parameter before the step must not run backward after it, as with
  // LibTorch's in-place operators.
  auto w = torch::tensor({1.0f, 2.0f}).set_requires_grad(true);
  dtlab::train::AdamW opt(std::vector<torch::Tensor>{w}, AdamWOptions(0.1));
  (w * w).sum().backward();
  const torch::Tensor saved_w = (w * w).sum();  // saves w for its backward
  const auto version = w._version();
  opt.step();
  EXPECT_GT(w._version(), version);
  EXPECT_THROW(saved_w.backward(), c10::Error);
}

TEST(KitAdamW, RunsTheClosureWithGradientsAndReturnsItsLoss) {
  auto w = torch::tensor({1.0f, 2.0f}).set_requires_grad(true);
  dtlab::train::AdamW opt(std::vector<torch::Tensor>{w}, AdamWOptions(0.1).weight_decay(0));
  const torch::Tensor loss = opt.step([&] {
    EXPECT_TRUE(at::GradMode::is_enabled());
    opt.zero_grad();
    auto l = (w * w).sum();
    l.backward();
    return l;
  });
  EXPECT_FLOAT_EQ(loss.item<float>(), 5.0f);
  // First step of Adam: each parameter moves by lr against the sign of its gradient.
  EXPECT_NEAR(w[0].item<float>(), 0.9f, 1e-6);
  EXPECT_NEAR(w[1].item<float>(), 1.9f, 1e-6);
}

}  // namespace adamw_test
