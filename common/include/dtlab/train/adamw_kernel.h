// The element loop of the kit's AdamW (Note [AdamW in one pass], train/optimizer.h): no LibTorch
// here, so that its one source file can be compiled with the flag that lets it vectorise
// (common/CMakeLists.txt).
#pragma once

#include <cstdint>

namespace dtlab::train {

// One step's constants as float, as LibTorch's kernels convert a Scalar for a float tensor.
struct AdamWConstants {
  float keep = 1;  // 1 - lr * weight_decay
  float beta1 = 0, one_minus_beta1 = 0, beta2 = 0, one_minus_beta2 = 0;
  float sqrt_bias_correction2 = 1, eps = 0, minus_step_size = 0;
};

// Elements [begin, end) of a parameter p, its gradient g and its moments m and v:
//   p *= keep; m = m * beta1 + (1 - beta1) * g; v = v * beta2 + (1 - beta2) * g * g;
//   p += -step_size * m / (sqrt(v) / sqrt(bias_correction2) + eps).
void adamw_update(float* p, const float* g, float* m, float* v, int64_t begin, int64_t end,
                  const AdamWConstants& c);

}  // namespace dtlab::train
