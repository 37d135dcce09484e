// The numbers the checks compare: rank dumps (train/rank_dump.h) against each other and
// against the kit's single-process run, and per-iteration losses.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "dtlab/io/safetensors.h"
#include "dtlab/train/rank_dump.h"

namespace dtlab::grader {

// rank0.safetensors ... rank<world-1>.safetensors of dir (or the rank<r>.start files written
// before the step); throws dtlab::Error naming a missing or unreadable file.
std::vector<io::TensorMap> load_dumps(const std::filesystem::path& dir, int world,
                                      train::DumpPoint point = train::DumpPoint::kAfterSync);

struct Difference {
  double max_abs = 0;     // largest |a - b| over every element of every tensor compared
  double scale = 0;       // largest |b|: what max_abs is relative to
  std::string worst;      // the tensor where max_abs is (without the prefix)
  std::string missing;    // a tensor of b that a lacks (or has another shape), if any
  double relative() const { return scale > 0 ? max_abs / scale : max_abs; }
};

// Compares the tensors of a and b whose names start with prefix ("grad.", "param.").
Difference compare_tensors(const io::TensorMap& a, const io::TensorMap& b, const std::string& prefix);

// <a, b> / <b, b> over the prefixed tensors: the factor a is of b if a is a multiple of b.
double projection_factor(const io::TensorMap& a, const io::TensorMap& b, const std::string& prefix);
// |a - factor b| / |b| over the prefixed tensors: how far a is from that multiple of b (0 when a is
// exactly factor times b). A scale is the cause only where this is small.
double scaled_residual(const io::TensorMap& a, const io::TensorMap& b, const std::string& prefix, double factor);
// Whether every element of a is within `relative` of its own b (|a - b| <= relative |b| + floor)
// over the prefixed tensors: a's error grows with each element's size, as rounding to a shorter
// float does, not with the largest gradient's, as a wrong sum would.
bool within_own_size(const io::TensorMap& a, const io::TensorMap& b, const std::string& prefix, double relative,
                     double floor);

// The "loss" of every record of results["iterations"].
std::vector<double> iteration_losses(const nlohmann::json& results);

// The index of the first step where |a - b| > tolerance over the first n (-1 when none), and
// the largest difference.
struct LossDifference {
  int first_step = -1;  // from 1
  double max_abs = 0;
};
LossDifference compare_losses(const std::vector<double>& a, const std::vector<double>& b, size_t n,
                              double tolerance);

}  // namespace dtlab::grader
