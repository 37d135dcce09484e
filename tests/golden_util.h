// Helpers of the suites that compare the kit with golden data from Hugging Face (tests/golden/):
// tensors from the JSON the make_*_golden.py scripts write, and the comparison with its report.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "dtlab/model/checkpoint.h"

namespace dtlab::test {

// A tensor from a JSON number or nested arrays of numbers, the nesting as its shape. The golden
// scripts write float32 values as JSON doubles, so float64 holds them exactly.
inline torch::Tensor golden_tensor(const nlohmann::json& values, torch::ScalarType dtype) {
  std::vector<int64_t> shape;
  for (const nlohmann::json* j = &values; j->is_array(); j = &j->at(0)) shape.push_back(static_cast<int64_t>(j->size()));
  std::vector<double> flat;
  std::function<void(const nlohmann::json&)> collect = [&](const nlohmann::json& j) {
    if (!j.is_array()) {
      flat.push_back(j.get<double>());
      return;
    }
    for (const auto& item : j) collect(item);
  };
  collect(values);
  return torch::tensor(flat, torch::kFloat64).view(shape).to(dtype);
}

// Expects `actual` to have the golden shape and to be within `tolerance` of it everywhere;
// reports the largest absolute difference and where it is either way.
inline void expect_matches_golden(const torch::Tensor& actual, const nlohmann::json& golden, const std::string& what,
                                  double tolerance) {
  ASSERT_TRUE(actual.defined()) << what << " is undefined";
  const torch::Tensor expected = golden_tensor(golden, torch::kFloat64);
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what << ": shape " << model::shape_string(actual.sizes())
                                              << ", golden " << model::shape_string(expected.sizes());
  const torch::Tensor diff = (actual.detach().to(torch::kCPU, torch::kFloat64) - expected).abs();
  const double max_diff = diff.max().item<double>();
  const int64_t where = diff.flatten().argmax().item<int64_t>();
  EXPECT_LE(max_diff, tolerance) << what << ": max abs diff " << max_diff << " at flat index " << where << " (got "
                                 << actual.detach().flatten()[where].item<double>() << ", golden "
                                 << expected.flatten()[where].item<double>() << ")";
  std::cout << "[ golden   ] " << what << ": max abs diff " << max_diff << "\n";
}

}  // namespace dtlab::test
