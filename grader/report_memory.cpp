// The report's table of memory and compute: for each graded exercise, one of its runs (the one of
// the most ranks that measured them): what its ranks' tensors took at the steps' peak (the kit's
// counting allocator), rank 0's parameters, gradients (- where the step does not end in the kit's
// apply_update: zero's sharded steps, task 1's own) and optimiser state, the most resident memory
// a rank held in its steps, and the model FLOPs a second against the ranks' measured peak
// (results.json's "memory" and "compute" sections, train/run.h).
#include <algorithm>
#include <map>

#include "exercises.h"
#include "report_parts.h"

namespace dtlab::grader::report_parts {

namespace {

// The largest of a per-rank array of numbers; nullopt when there is none.
std::optional<double> most(const json& results, std::initializer_list<const char*> keys) {
  const json* values = find(results, keys);
  if (!values || !values->is_array() || values->empty()) return std::nullopt;
  double m = -1;
  for (const json& v : *values) {
    if (v.is_number()) m = std::max(m, v.get<double>());
  }
  return m >= 0 ? std::optional<double>(m) : std::nullopt;
}

std::optional<double> first(const json& results, std::initializer_list<const char*> keys) {
  const json* values = find(results, keys);
  if (!values || !values->is_array() || values->empty() || !values->at(0).is_number()) return std::nullopt;
  return values->at(0).get<double>();
}

// -1 is "not measured" (gradients where the step does not end in apply_update, train/run.h).
std::optional<double> nonnegative(const std::optional<double>& v) {
  return v && *v >= 0 ? v : std::nullopt;
}

std::string mb(const std::optional<double>& bytes) { return bytes ? fmt::format("{:.2f}", *bytes / 1e6) : "-"; }

}  // namespace

Table memory_compute_table(const Folder& f, const std::optional<std::vector<std::string>>& graded) {
  Table table;
  table.title =
      "Memory and compute of each exercise: of its runs, the one of the most ranks (tensors from the kit's counting "
      "allocator, report/tensor_bytes.h, beside the resident set; MFU against the ranks' measured fp32 matrix-product "
      "peak, Note [The machine's peak])";
  table.header = {"exercise", "run", "ranks", "tensors at the steps' peak, MB (most of a rank)", "parameters, MB (rank 0)",
                  "gradients, MB (rank 0)", "optimiser state, MB (rank 0)", "resident in the steps, MiB (most of a rank)",
                  "model GFLOP/s", "MFU"};
  table.align = "llrrrrrrrr";
  std::map<std::string, const Run*> chosen;
  for (const Run& run : f.every_run) {
    if (!most(run.results, {"memory", "tensor_steps_peak_bytes"})) continue;
    const Run*& best = chosen[run.exercise];
    if (!best || run.world > best->world) best = &run;
  }
  for (const Exercise& e : exercises()) {
    if (graded && std::find(graded->begin(), graded->end(), e.name) == graded->end()) continue;
    const auto it = chosen.find(e.name);
    if (it == chosen.end()) continue;
    const json& r = it->second->results;
    const std::optional<double> mfu = number(r, {"compute", "mfu"});
    const std::optional<double> flops = number(r, {"compute", "model_flops_per_second"});
    const std::optional<double> rss = most(r, {"memory", "steps_peak_rss_bytes"});
    table.rows.push_back({e.name, it->second->id, std::to_string(it->second->world),
                          mb(most(r, {"memory", "tensor_steps_peak_bytes"})), mb(first(r, {"memory", "parameter_bytes"})),
                          mb(nonnegative(first(r, {"memory", "gradient_bytes"}))),
                          mb(first(r, {"memory", "optimizer_state_bytes"})),
                          rss ? fmt::format("{:.1f}", *rss / (1 << 20)) : "-",
                          flops ? fmt::format("{:.2f}", *flops / 1e9) : "-",
                          mfu ? fmt::format("{:.1f}%", 100 * *mfu) : "-"});
  }
  return table;
}

}  // namespace dtlab::grader::report_parts
