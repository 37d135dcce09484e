// Comparing dumps and losses, see compare.h.
#include "compare.h"

#include <torch/types.h>

#include <algorithm>
#include <cmath>

#include "dtlab/core/error.h"
#include "dtlab/train/rank_dump.h"

namespace dtlab::grader {

std::vector<io::TensorMap> load_dumps(const std::filesystem::path& dir, int world, train::DumpPoint point) {
  std::vector<io::TensorMap> dumps;
  for (int r = 0; r < world; ++r) {
    const auto path = train::rank_dump_path(dir, r, point);
    if (!std::filesystem::exists(path)) {
      throw Error("rank " + std::to_string(r) + " wrote no " + path.string() +
                  " (it never reached the dumped step)");
    }
    dumps.push_back(io::load_safetensors(path));
  }
  return dumps;
}

Difference compare_tensors(const io::TensorMap& a, const io::TensorMap& b, const std::string& prefix) {
  Difference d;
  for (const auto& [name, want] : b) {
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string key = name.substr(prefix.size());
    const auto it = a.find(name);
    if (it == a.end() || !it->second.sizes().equals(want.sizes())) {
      if (d.missing.empty()) d.missing = key;
      continue;
    }
    const torch::Tensor x = it->second.to(torch::kFloat64), y = want.to(torch::kFloat64);
    if (x.numel() == 0) continue;
    double diff = (x - y).abs().max().item<double>();
    if (std::isnan(diff)) diff = INFINITY;  // a NaN is as wrong as it gets
    d.scale = std::max(d.scale, y.abs().max().item<double>());
    if (d.worst.empty() || diff > d.max_abs) {
      d.max_abs = diff;
      d.worst = key;
    }
  }
  return d;
}

bool within_own_size(const io::TensorMap& a, const io::TensorMap& b, const std::string& prefix, double relative,
                     double floor) {
  for (const auto& [name, y] : b) {
    if (name.rfind(prefix, 0) != 0) continue;
    const auto it = a.find(name);
    if (it == a.end() || !it->second.sizes().equals(y.sizes())) return false;
    const torch::Tensor x = it->second.to(torch::kFloat64), yy = y.to(torch::kFloat64);
    if (((x - yy).abs() > yy.abs() * relative + floor).any().item<bool>()) return false;
  }
  return true;
}

double projection_factor(const io::TensorMap& a, const io::TensorMap& b, const std::string& prefix) {
  double ab = 0, bb = 0;
  for (const auto& [name, y] : b) {
    if (name.rfind(prefix, 0) != 0) continue;
    const auto it = a.find(name);
    if (it == a.end() || !it->second.sizes().equals(y.sizes())) continue;
    const torch::Tensor x = it->second.to(torch::kFloat64), yy = y.to(torch::kFloat64);
    ab += (x * yy).sum().item<double>();
    bb += (yy * yy).sum().item<double>();
  }
  return bb > 0 ? ab / bb : 0.0;
}

double scaled_residual(const io::TensorMap& a, const io::TensorMap& b, const std::string& prefix, double factor) {
  double rr = 0, bb = 0;
  for (const auto& [name, y] : b) {
    if (name.rfind(prefix, 0) != 0) continue;
    const auto it = a.find(name);
    if (it == a.end() || !it->second.sizes().equals(y.sizes())) continue;
    const torch::Tensor yy = y.to(torch::kFloat64);
    rr += (it->second.to(torch::kFloat64) - factor * yy).pow(2).sum().item<double>();
    bb += yy.pow(2).sum().item<double>();
  }
  return bb > 0 ? std::sqrt(rr / bb) : 0.0;
}

std::vector<double> iteration_losses(const nlohmann::json& results) {
  std::vector<double> losses;
  if (!results.is_object() || !results.contains("iterations")) return losses;
  for (const auto& it : results.at("iterations")) losses.push_back(it.at("loss").get<double>());
  return losses;
}

LossDifference compare_losses(const std::vector<double>& a, const std::vector<double>& b, size_t n,
                              double tolerance) {
  LossDifference d;
  for (size_t i = 0; i < n && i < a.size() && i < b.size(); ++i) {
    const double diff = std::abs(a[i] - b[i]);
    d.max_abs = std::max(d.max_abs, diff);
    if (!(diff <= tolerance) && d.first_step < 0) d.first_step = static_cast<int>(i) + 1;
  }
  return d;
}

}  // namespace dtlab::grader
