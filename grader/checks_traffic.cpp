// The checks of task 4: the student's traffic model against the kit's own ring arithmetic over
// the recorded all_reduces, and against the bytes the network interface counted.
#include <fmt/format.h>

#include <cmath>

#include "checks.h"

namespace dtlab::grader {
namespace {

constexpr int kWorld = 4;

// Full epochs at the three batch sizes: halving the batch doubles the iterations and so the
// bytes, which is what the figure shows. A short sequence keeps an epoch quick.
const Run& traffic_run(Runner& runner, const std::string& e) {
  return runner.run({e + "-traffic-w4", e, "traffic", kWorld,
                     {"--max_seq_length", "32", "--batch_sizes", "64,32,16", "--dropout", "0"}, false});
}

// Gloo's ring all_reduce: every rank sends 2 (n - 1) / n of the tensor.
double kit_expected_bytes(const nlohmann::json& row, int world, int ranks_here) {
  double per_iteration = 0;
  for (const auto& r : row.at("all_reduces_per_iteration")) {
    per_iteration += 2.0 * (world - 1) / world * r.at("bytes").get<double>();
  }
  return per_iteration * row.at("iterations").get<double>() * ranks_here;
}

Verdict traffic_model(Runner& runner, const std::string& e) {
  const Run& run = traffic_run(runner, e);
  if (run.failure) return *run.failure;
  const auto& env = run.results.at("environment");
  const int world = env.at("world_size").get<int>(), here = env.at("ranks_on_this_host").get<int>();
  std::string table;
  for (const auto& row : run.results.at("traffic")) {
    const double want = kit_expected_bytes(row, world, here);
    const double got = row.at("expected_bytes_this_host").get<double>();
    const int batch = row.at("global_batch_size").get<int>();
    if (!(std::abs(got - want) <= 1e-9 * std::max(1.0, want))) {
      return {Status::kWrongNumber,
              fmt::format("{} at batch {}: your model expects {:.0f} bytes, the ring all_reduce sends {:.0f} "
                          "(every rank sends 2 (n-1)/n of each tensor, for each all_reduce of an iteration, times "
                          "the iterations); ratio {:.4f}", e, batch, got, want, want > 0 ? got / want : 0.0)};
    }
    table += fmt::format("\n  batch {:>3}: {:>4} iterations, {:.1f} MB expected", batch,
                         row.at("iterations").get<int>(), want / 1e6);
  }
  return {Status::kPassed, e + " at 4 ranks: the expected bytes equal the ring all_reduce's:" + table};
}

Verdict traffic_measured(Runner& runner, const std::string& e) {
  const Run& run = traffic_run(runner, e);
  if (run.failure) return *run.failure;
  std::string table;
  for (const auto& row : run.results.at("traffic")) {
    const double ratio = row.at("ratio_measured_to_expected").get<double>();
    const int batch = row.at("global_batch_size").get<int>();
    table += fmt::format("\n  batch {:>3}: measured / expected = {:.3f}", batch, ratio);
    if (!(ratio >= kTrafficLow && ratio <= kTrafficHigh)) {
      return {Status::kWrongNumber,
              fmt::format("{} at batch {}: measured / expected = {:.3f}, outside [{:g}, {:g}]: does the model "
                          "count every all_reduce of an iteration, and every iteration of the epoch?{}",
                          e, batch, ratio, kTrafficLow, kTrafficHigh, table)};
    }
  }
  return {Status::kPassed, fmt::format("{} at 4 ranks: the interface counted what the model expects (headers "
                                       "included) at every batch size:{}", e, table)};
}

}  // namespace

std::vector<CheckSpec> traffic_checks(const std::string& e) {
  return {
      {e, "model", "expected bytes per epoch equal the ring all_reduce's 2 (n-1)/n per tensor (4 ranks)", 6,
       [e](Runner& r) { return traffic_model(r, e); }},
      {e, "measured", "the bytes the network interface counts are within 5 % below / 10 % above expected", 4,
       [e](Runner& r) { return traffic_measured(r, e); }},
  };
}

}  // namespace dtlab::grader
