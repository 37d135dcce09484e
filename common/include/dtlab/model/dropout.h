// Dropout for the kit's models: what at::dropout computes on the CPU, bit for bit and from the
// same random numbers, in one pass over the mask instead of three.
//
// Note [Dropout's mask]: LibTorch 1.13 on the CPU (Debian's, built without MKL) draws a dropout
// mask with Tensor::bernoulli_(1 - p): one element after another, each from a 53-bit uniform made
// of two 32-bit draws of the default generator's Mersenne Twister, through the TensorIterator's
// serial loop; then noise.div_(1 - p) and input * noise. The profile of task 1's step put
// bernoulli_ at 18% of it (68 ms of 370 on bench_task1 tiny), in the kit and in eager PyTorch
// alike. dropout_noise() draws the same numbers from the same generator in the same order
// (tempering a block of the twister's state at a time, the comparison on the 53-bit integer),
// and writes 1 / (1 - p) or 0 directly (the float division div_ computes), so that masks, losses
// and the generator's state after the step are unchanged (tests/model_dropout_test.cpp compares
// it with at::dropout under one seed): about twice as fast (34 -> 17-22 ms a step on the
// fixture's BERT at batch 32 x 128, measured with --profile).
//
// That holds for a LibTorch whose CPU bernoulli_ draws serially from the twister, as Debian's 1.13
// and PyPI's 2.15 do on this machine (an AMD EPYC); a build whose bernoulli_ draws otherwise (2.x
// wheels carry MKL, which has a Bernoulli generator of its own) must not get the kit's mask. So
// dropout() checks once per process, on generators of its own, that dropout_noise draws what
// bernoulli_ draws, and otherwise calls at::dropout. It also takes a contiguous input only: 1.13's
// at::dropout made its noise contiguous, 2.x's keeps the input's strides (a transposed input's
// mask is drawn in memory order). So the kit's dropout equals at::dropout on every LibTorch, and
// is the faster one where it can be.
#pragma once

#include <ATen/core/Generator.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

namespace dtlab::model {

// The noise tensor of at::dropout(like, p, true): like's shape, contiguous float, each element
// 1 / (1 - p) with probability 1 - p, else 0, drawn from generator (default: the default CPU
// generator) exactly as bernoulli_(1 - p) draws them. 0 < p < 1.
torch::Tensor dropout_noise(const torch::Tensor& like, double p,
                            c10::optional<at::Generator> generator = c10::nullopt);

// Whether dropout_noise draws exactly the mask, and leaves the generator exactly where,
// bernoulli_(1 - p) then div_(1 - p) does on this LibTorch (computed once per process).
bool dropout_noise_is_bernoullis();

// at::dropout(x, p, training): x itself when not training or p = 0; x * dropout_noise(x, p)
// for a contiguous float CPU tensor where dropout_noise_is_bernoullis(); at::dropout for anything
// else.
torch::Tensor dropout(const torch::Tensor& x, double p, bool training);

// torch::nn::Dropout's module, with dropout() above as its forward.
class DropoutImpl : public torch::nn::Cloneable<DropoutImpl> {
 public:
  explicit DropoutImpl(double p = 0.5);
  void reset() override {}
  torch::Tensor forward(const torch::Tensor& x);
  double p;
};
TORCH_MODULE(Dropout);

}  // namespace dtlab::model
