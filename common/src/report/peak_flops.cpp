// The measured peak, see report/peak_flops.h.
#include "dtlab/report/peak_flops.h"

#include <ATen/ATen.h>

#include "dtlab/report/timing.h"

namespace dtlab::report {

double measure_matmul_flops(int64_t n, int repeats) {
  // Constant operands: a product costs the same whatever the values, and draws nothing from the
  // generator training and dropout use.
  const at::Tensor a = at::full({n, n}, 0.5), b = at::full({n, n}, 0.25);
  at::Tensor c = at::mm(a, b);  // warm-up: the BLAS's threads and buffers
  Stopwatch watch;
  for (int i = 0; i < repeats; ++i) c = at::mm(a, b);
  const double seconds = watch.seconds();
  const double n3 = static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  return seconds > 0 ? 2.0 * n3 * repeats / seconds : 0.0;
}

}  // namespace dtlab::report
