// The report's table and figure (19) of memory and compute: for each graded exercise, one of its
// runs (the one of the most ranks that measured them): what its ranks' tensors took at the steps'
// peak (the kit's counting allocator), their parameters, gradients (- where the step does not end
// in the kit's apply_update: task 1's own, and those of pp, zero, tp and the mesh) and optimiser
// state, the most resident memory a rank held in its steps, and the model FLOPs a second against
// the ranks' measured peak (results.json's "memory" and "compute" sections, train/run.h).
#include <algorithm>
#include <map>
#include <set>
#include <string>

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

// Rank r's entry of a per-rank array of byte counts; nullopt where it is missing or -1, "not
// measured" (the gradients where the step does not end in apply_update, train/run.h).
std::optional<double> at_rank(const json& results, std::initializer_list<const char*> keys, size_t r) {
  const json* values = find(results, keys);
  if (!values || !values->is_array() || r >= values->size() || !(*values)[r].is_number() ||
      (*values)[r].get<double>() < 0) {
    return std::nullopt;
  }
  return (*values)[r].get<double>();
}

std::string mb(const std::optional<double>& bytes) { return bytes ? fmt::format("{:.2f}", *bytes / 1e6) : "-"; }

// Each graded exercise's run of the most ranks whose results.json measured its tensors, in the
// exercise table's order (graded: the exercises the grading graded; nullopt: all).
std::vector<std::pair<std::string, const Run*>> measured_runs(const Folder& f,
                                                              const std::optional<std::vector<std::string>>& graded) {
  std::map<std::string, const Run*> chosen;
  for (const Run& run : f.every_run) {
    if (!most(run.results, {"memory", "tensor_steps_peak_bytes"})) continue;
    const Run*& best = chosen[run.exercise];
    if (!best || run.world > best->world) best = &run;
  }
  std::vector<std::pair<std::string, const Run*>> runs;
  for (const Exercise& e : exercises()) {
    if (graded && std::find(graded->begin(), graded->end(), e.name) == graded->end()) continue;
    const auto it = chosen.find(e.name);
    if (it != chosen.end()) runs.emplace_back(e.name, it->second);
  }
  return runs;
}

// Bytes as MB for a figure's data; NaN (which gnuplot leaves out) where not measured.
std::string data_mb(const std::optional<double>& bytes) { return bytes ? fmt::format("{:.4f}", *bytes / 1e6) : "NaN"; }

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
  for (const auto& [name, run] : measured_runs(f, graded)) {
    const json& r = run->results;
    const std::optional<double> mfu = number(r, {"compute", "mfu"});
    const std::optional<double> flops = number(r, {"compute", "model_flops_per_second"});
    const std::optional<double> rss = most(r, {"memory", "steps_peak_rss_bytes"});
    table.rows.push_back({name, run->id, std::to_string(run->world),
                          mb(most(r, {"memory", "tensor_steps_peak_bytes"})), mb(at_rank(r, {"memory", "parameter_bytes"}, 0)),
                          mb(at_rank(r, {"memory", "gradient_bytes"}, 0)),
                          mb(at_rank(r, {"memory", "optimizer_state_bytes"}, 0)),
                          rss ? fmt::format("{:.1f}", *rss / (1 << 20)) : "-",
                          flops ? fmt::format("{:.2f}", *flops / 1e9) : "-",
                          mfu ? fmt::format("{:.1f}%", 100 * *mfu) : "-"});
  }
  return table;
}

Figure exercise_memory_figure(const Folder& f, const Provenance& pv, Plotter& plotter,
                              const std::optional<std::vector<std::string>>& graded) {
  Figure fig{19, "exercise_memory", "Memory per rank of every exercise"};
  const std::vector<std::pair<std::string, const Run*>> runs = measured_runs(f, graded);
  if (runs.empty()) {
    fig.missing = fmt::format("no finished run in {} whose results.json measured its tensors (its memory section's "
                              "tensor_steps_peak_bytes)", (f.dir / "runs").string());
    return fig;
  }
  // One bar a rank, a gap between exercises; the parts stacked as the table's columns are.
  std::string data =
      "# Figure 19: one row per rank of each exercise's run of the most ranks (MB = 10^6 bytes):\n"
      "# position label parameters gradients optimiser_state rest_at_peak tensors_at_peak rss_after_startup "
      "rss_steps_peak  (NaN: not measured)\n";
  std::set<int> worlds;
  std::string which, unmeasured;
  int position = 0;
  for (const auto& [name, run] : runs) {
    const json& r = run->results;
    worlds.insert(run->world);
    which += fmt::format("{}{} runs/{}", which.empty() ? "" : ", ", name, run->id);
    for (int rank = 0; rank < run->world; ++rank) {
      const size_t at = static_cast<size_t>(rank);
      auto bytes = [&](const char* key) { return at_rank(r, {"memory", key}, at); };
      const std::optional<double> parameters = bytes("parameter_bytes"), gradients = bytes("gradient_bytes"),
                                  state = bytes("optimizer_state_bytes"), peak = bytes("tensor_steps_peak_bytes");
      if (rank == 0 && !gradients) unmeasured += (unmeasured.empty() ? "" : ", ") + name;
      // Where the gradients were not measured their bytes are among the rest: the peak less the
      // parameters and the optimiser state.
      std::optional<double> rest = bytes("activations_and_rest_at_peak_bytes");
      if (!gradients && peak && parameters && state) rest = std::max(0.0, *peak - *parameters - *state);
      data += fmt::format("{} \"{}\" {} {} {} {} {} {} {}  # runs/{} rank {}\n", position,
                          rank == 0 ? name + " 0" : std::to_string(rank), data_mb(parameters), data_mb(gradients),
                          data_mb(state), data_mb(rest), data_mb(peak), data_mb(bytes("rss_after_startup_bytes")),
                          data_mb(bytes("steps_peak_rss_bytes")), run->id, rank);
      ++position;
    }
    ++position;  // the gap before the next exercise
  }
  fig.provenance = pv.line(worlds);
  plotter.plot(fig, data, {fmt::format("xmax={}", position - 1)});
  fig.caption = fmt::format(
      "Each exercise's run of the most ranks at the grading's sizes, one bar a rank. Above, the CPU tensors each "
      "rank held at its training steps' peak (the kit's counting allocator, report/tensor_bytes.h), stacked: its "
      "parameters, its gradients at the update, its optimiser state, and the rest alive at the peak (activations, "
      "the batch, temporaries; a lower bound of those, as the peak may come before every gradient exists).{} Below, "
      "the most resident memory each rank's process held in its steps (its peak RSS, reset after loading), split at "
      "what it held after start-up (LibTorch, the data, the model): what the figures above are beside. The runs: "
      "{}.",
      unmeasured.empty() ? ""
                         : fmt::format(" Where a step does not end in the kit's apply_update ({}) its gradients are not "
                                       "measured and are among the rest.", unmeasured),
      which);
  return fig;
}

}  // namespace dtlab::grader::report_parts
