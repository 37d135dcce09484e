// Note [Dropout's mask]: the kit's dropout draws the same mask as at::dropout from the same
// generator, leaves the generator where at::dropout leaves it, and gives the same gradients.
#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <ATen/CPUGeneratorImpl.h>

#include "dtlab/model/dropout.h"

namespace model_dropout_test {

struct Drawn {
  torch::Tensor out, grad, next;  // the output, the input's gradient, the generator's next draw
};

Drawn draw(const torch::Tensor& x0, double p, bool kit, uint64_t seed) {
  torch::manual_seed(seed);
  const torch::Tensor x = x0.detach().clone().requires_grad_(true);
  const torch::Tensor source = x0.dim() == 2 ? x.t() : x;  // a non-contiguous input too
  const torch::Tensor out = kit ? dtlab::model::dropout(source, p, true) : torch::dropout(source, p, true);
  (out * torch::arange(out.numel(), torch::kFloat).view(out.sizes())).sum().backward();
  return {out.detach(), x.grad(), torch::rand({3})};
}

}  // namespace model_dropout_test

using model_dropout_test::draw;

TEST(KitDropout, SameMaskGradientAndGeneratorStateAsAtDropout) {
  for (double p : {0.1, 0.5, 0.9}) {
    for (const auto& shape : std::vector<std::vector<int64_t>>{{1}, {7}, {33, 65}, {2, 3, 5, 7}}) {
      const torch::Tensor x = torch::randn(shape);
      const auto kit = draw(x, p, true, 1234);
      const auto at = draw(x, p, false, 1234);
      EXPECT_TRUE(torch::equal(kit.out, at.out)) << "p " << p << " shape " << x.sizes();
      EXPECT_TRUE(torch::equal(kit.grad, at.grad)) << "p " << p << " shape " << x.sizes();
      EXPECT_TRUE(torch::equal(kit.next, at.next)) << "the generator moved differently, p " << p;
    }
  }
}

// Whether the kit may use its own mask is decided by comparing it with bernoulli_'s: the answer
// must be what a comparison on another seed, size and p finds too.
TEST(KitDropout, UsesItsOwnMaskExactlyWhereItEqualsBernoullis) {
  const at::Generator ours = at::make_generator<at::CPUGeneratorImpl>(99);
  const at::Generator theirs = at::make_generator<at::CPUGeneratorImpl>(99);
  const torch::Tensor noise = dtlab::model::dropout_noise(torch::empty({31, 17}), 0.55, ours);
  const torch::Tensor reference = torch::empty({31, 17}).bernoulli_(0.45, theirs).div_(0.45);
  EXPECT_EQ(dtlab::model::dropout_noise_is_bernoullis(), torch::equal(noise, reference));
  // Under one seed, the kit's dropout and at::dropout agree either way (the test above); where
  // the mask is the kit's, --profile shows its dtlab::dropout_noise row.
}

TEST(KitDropout, KeepsAboutOneMinusPAndScales) {
  torch::manual_seed(7);
  const torch::Tensor noise = dtlab::model::dropout_noise(torch::empty({100000}), 0.25);
  const torch::Tensor kept = noise.ne(0);
  EXPECT_NEAR(kept.to(torch::kDouble).mean().item<double>(), 0.75, 0.01);
  EXPECT_FLOAT_EQ(noise.max().item<float>(), 1.0f / 0.75f);
  EXPECT_THROW(dtlab::model::dropout_noise(torch::empty({3}), 1.0), std::exception);
}

TEST(KitDropout, IdentityWhenNotTrainingOrPIsZero) {
  const torch::Tensor x = torch::randn({4, 5});
  EXPECT_TRUE(dtlab::model::dropout(x, 0.3, false).is_same(x));
  EXPECT_TRUE(dtlab::model::dropout(x, 0.0, true).is_same(x));
  dtlab::model::Dropout module(0.3);
  module->eval();
  EXPECT_TRUE(module->forward(x).is_same(x));
  module->train();
  EXPECT_FALSE(torch::equal(module->forward(x), x));
  EXPECT_TRUE(torch::equal(dtlab::model::dropout(x, 1.0, true), torch::zeros_like(x)));
}
