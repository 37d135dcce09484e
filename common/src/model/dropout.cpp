// Dropout's mask drawn as bernoulli_ draws it, see Note [Dropout's mask] in model/dropout.h.
#include "dtlab/model/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/record_function.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <mutex>

#include "dtlab/core/error.h"
#include "dtlab/model/ops.h"

namespace dtlab::model {

namespace dropout_detail {

// `count` successive outputs of engine(), in bulk: the words of the current state block are
// tempered in one loop, and the engine's own call makes each new block (at::mt19937 twists when a
// call finds the block used up: left_ counts down to 1, then the next call twists and reads word 0).
void draw(at::mt19937& engine, uint32_t* out, int64_t count) {
  at::mt19937_data_pod d = engine.data();
  while (count > 0) {
    if (d.left_ <= 1) {
      engine.set_data(d);
      *out++ = engine();
      d = engine.data();
      --count;
      continue;
    }
    const int64_t take = std::min<int64_t>(d.left_ - 1, count);
    const uint32_t* words = d.state_.data() + d.next_;
    for (int64_t i = 0; i < take; ++i) {  // at::mt19937's tempering
      uint32_t y = words[i];
      y ^= (y >> 11);
      y ^= (y << 7) & 0x9d2c5680;
      y ^= (y << 15) & 0xefc60000;
      out[i] = y ^ (y >> 18);
    }
    d.next_ += static_cast<uint32_t>(take);
    d.left_ -= static_cast<int>(take);
    out += take;
    count -= take;
  }
  engine.set_data(d);
}

}  // namespace dropout_detail

torch::Tensor dropout_noise(const torch::Tensor& like, double p, c10::optional<at::Generator> generator) {
  if (!(p > 0 && p < 1)) throw Error(fmt::format("dropout_noise: p must be in (0, 1), got {}", p));
  RECORD_FUNCTION("dtlab::dropout_noise", std::vector<c10::IValue>());  // a row of --profile's table
  torch::Tensor noise = torch::empty(like.sizes(), torch::TensorOptions().dtype(torch::kFloat));
  const double keep = 1 - p;
  // noise.div_(keep) on a float tensor divides in float by float(keep).
  const float kept = 1.0f / static_cast<float>(keep);
  float* out = noise.data_ptr<float>();
  const int64_t n = noise.numel();
  auto* impl = at::get_generator_or_default<at::CPUGeneratorImpl>(generator, at::detail::getDefaultCPUGenerator());
  std::lock_guard<std::mutex> lock(impl->mutex_);
  at::mt19937 engine = impl->engine();
  // at::bernoulli_distribution<double>: uniform_real_distribution<double> from random64(), two
  // engine draws (the first the high word), their low 53 bits times 2^-53; kept if below keep.
  // bits * 2^-53 < keep exactly when bits < keep * 2^53 (scaling by a power of two is exact),
  // that is when the integer bits is below the ceiling of it: one integer comparison.
  constexpr uint64_t kMask = (uint64_t(1) << 53) - 1;
  const auto threshold = static_cast<int64_t>(std::ceil(keep * double(uint64_t(1) << 53)));
  constexpr int64_t kChunk = 2048;  // elements per batch of draws
  std::array<uint32_t, 2 * kChunk> words;
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t m = std::min(kChunk, n - start);
    dropout_detail::draw(engine, words.data(), 2 * m);
    for (int64_t i = 0; i < m; ++i) {
      const uint64_t hi = words[2 * i], lo = words[2 * i + 1];
      const auto bits = static_cast<int64_t>(((hi << 32) | lo) & kMask);
      out[start + i] = bits < threshold ? kept : 0.0f;
    }
  }
  impl->set_engine(engine);
  return noise;
}

bool dropout_noise_is_bernoullis() {
  static const bool same = [] {
    // Two generators of one seed, one for each side, so the default generator is not touched.
    constexpr uint64_t kSeed = 20221028;
    constexpr double kP = 0.3;
    at::Generator ours = at::make_generator<at::CPUGeneratorImpl>(kSeed);
    at::Generator theirs = at::make_generator<at::CPUGeneratorImpl>(kSeed);
    const torch::Tensor like = torch::empty({4099});
    const torch::Tensor noise = dropout_noise(like, kP, ours);
    const torch::Tensor reference = torch::empty_like(like).bernoulli_(1 - kP, theirs).div_(1 - kP);
    std::lock_guard<std::mutex> a(ours.mutex()), b(theirs.mutex());
    return torch::equal(noise, reference) &&
           ours.get<at::CPUGeneratorImpl>()->random64() == theirs.get<at::CPUGeneratorImpl>()->random64();
  }();
  return same;
}

torch::Tensor dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p == 0 || x.numel() == 0) return x;
  if (ops_in_use() == Ops::plain) return torch::dropout(x, p, training);
  // A contiguous input only: 1.13's at::dropout made its noise contiguous, 2.x's in the input's
  // layout (empty_like keeps a transposed input's strides), so only there do the two agree.
  if (p > 0 && p < 1 && x.device().is_cpu() && x.scalar_type() == torch::kFloat && x.is_contiguous() &&
      dropout_noise_is_bernoullis()) {
    return x * dropout_noise(x, p);
  }
  return torch::dropout(x, p, training);
}

DropoutImpl::DropoutImpl(double p) : p(p) {
  if (!(p >= 0 && p <= 1)) throw Error(fmt::format("dropout probability must be between 0 and 1, got {}", p));
}

// Qualified: at::dropout is found by argument-dependent lookup too.
torch::Tensor DropoutImpl::forward(const torch::Tensor& x) { return model::dropout(x, p, is_training()); }

}  // namespace dtlab::model
