// The counting allocator (Note [Counting allocator], report/tensor_bytes.h): every CPU tensor's
// storage counted while it lives, and the peak. Its own program: the meter replaces the process's
// CPU allocator for good.
#include <gtest/gtest.h>

#include <torch/types.h>

#include "dtlab/report/tensor_bytes.h"

namespace {

using dtlab::report::TensorBytes;

TEST(TensorBytes, CountsStorageWhileItLivesAndThePeak) {
  EXPECT_EQ(TensorBytes::installed(), nullptr);
  TensorBytes& meter = TensorBytes::install();
  EXPECT_EQ(&TensorBytes::install(), &meter);
  EXPECT_EQ(TensorBytes::installed(), &meter);
  const int64_t before = meter.current();
  meter.reset_peak();
  int64_t peak_of_both = 0;
  {
    torch::Tensor a = torch::ones({1000, 250});  // 1,000,000 bytes of float
    EXPECT_EQ(meter.current() - before, 1'000'000);
    {
      torch::Tensor b = a * 2;  // another as large, alive with a
      EXPECT_EQ(meter.current() - before, 2'000'000);
      peak_of_both = meter.peak() - before;
      EXPECT_FLOAT_EQ(b[3][7].item<float>(), 2.0f);  // the storage is real memory (item's scalar counts too)
    }
    EXPECT_EQ(meter.current() - before, 1'000'000);
    torch::Tensor view = a.narrow(0, 0, 10);  // a view allocates no storage
    EXPECT_EQ(meter.current() - before, 1'000'000);
  }
  EXPECT_EQ(meter.current(), before);
  // a * 2 wraps the 2 in a scalar tensor of its own for the multiplication: a few bytes more.
  EXPECT_GE(peak_of_both, 2'000'000);
  EXPECT_LE(peak_of_both, 2'000'064);
  EXPECT_GE(meter.peak() - before, 2'000'000);
  meter.reset_peak();
  EXPECT_EQ(meter.peak(), meter.current());
  // A resize that grows the storage allocates anew: the old storage is given back.
  torch::Tensor grown = torch::zeros({10});
  grown.resize_({100000});
  EXPECT_EQ(meter.current() - before, 400'000);
}

}  // namespace
