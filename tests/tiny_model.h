// A model of three small modules for the sharding suites (shard_test, zero_test): 7*5 + 5 (a
// decayed weight, an exempt bias) + 5 + 5 (layer norm, exempt) + 5*3 (decayed, no bias) = 65
// parameters, which 2 and 3 do not divide, so flat buffers over 2 or 3 ranks are padded.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

namespace dtlab::test {

struct TinyModel : torch::nn::Module {
  TinyModel() {
    fc = register_module("fc", torch::nn::Linear(7, 5));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({5})));
    out = register_module("out", torch::nn::Linear(torch::nn::LinearOptions(5, 3).bias(false)));
  }
  torch::Tensor forward(const torch::Tensor& x) { return out(norm(fc(x))); }
  torch::nn::Linear fc{nullptr}, out{nullptr};
  torch::nn::LayerNorm norm{nullptr};
};

}  // namespace dtlab::test
