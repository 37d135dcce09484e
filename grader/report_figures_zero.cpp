// The zero exercise's figure of `grader report` (13): what rank 0 held at each stage of sharding
// at 1, 2 and 4 ranks, measured, beside the kit's memory model (shard/memory_model.h); see
// report_parts.h.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "dtlab/shard/memory_model.h"
#include "report_parts.h"

namespace dtlab::grader::report_parts {
namespace zero_figures {

// The units of the run's model as the memory model takes them, from its results.json; nullopt
// when the section lacks them.
std::optional<shard::ModelUnits> units_of(const json& sharding) {
  const json* names = find(sharding, {"unit_names"});
  const json* numel = find(sharding, {"unit_numel"});
  const json* stages = find(sharding, {"stage_units"});
  if (!names || !numel || !stages || !names->is_array() || !numel->is_array() || !stages->is_array() ||
      names->size() != numel->size()) {
    return std::nullopt;
  }
  shard::ModelUnits units;
  for (size_t u = 0; u < names->size(); ++u) {
    if (!(*names)[u].is_string() || !(*numel)[u].is_number_integer()) return std::nullopt;
    units.names.push_back((*names)[u].get<std::string>());
    units.numel.push_back((*numel)[u].get<int64_t>());
  }
  for (const json& stage : *stages) {
    if (!stage.is_array()) return std::nullopt;
    std::vector<size_t> reads;
    for (const json& u : stage) {
      if (!u.is_number_unsigned() || u.get<size_t>() >= units.numel.size()) return std::nullopt;
      reads.push_back(u.get<size_t>());
    }
    units.stage_units.push_back(std::move(reads));
  }
  return units;
}

double mb(double bytes) { return bytes / 1e6; }

}  // namespace zero_figures

Figure zero_memory_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table) {
  namespace z = zero_figures;
  Figure fig{13, "zero_memory", "Sharding: what a rank holds at each stage against the ranks"};
  std::map<int, std::map<int, const Run*>> runs;  // world -> stage -> run
  for (const Run& r : f.runs) {
    const json* s = find(r.results, {"sharding"});
    if (r.purpose == "zero-scaling" && s && number(*s, {"peak_tensor_bytes"})) {
      runs[r.world][static_cast<int>(number(*s, {"stage"}).value_or(0))] = &r;
    }
  }
  std::optional<shard::ModelUnits> units;
  if (!runs.empty()) units = z::units_of(runs.begin()->second.begin()->second->results["sharding"]);
  if (runs.empty() || !units) {
    fig.missing = fmt::format("no finished zero scaling runs (purpose \"zero-scaling\") whose results.json says "
                              "what they held in {}", (f.dir / "runs").string());
    return fig;
  }
  table = {"Sharding (zero): rank 0's bytes at each stage, measured and by the memory model (scaling runs)",
           {"ranks", "stage", "parameters MB", "gradients MB", "AdamW MB", "the rest at the peak MB",
            "all tensors' peak MB", "model MB (parts)", "run"},
           "rlrrrrrrl", {}};
  std::string data = "# Figure 13: one index per world size; one row per stage:\n# position label parameters_MB "
                     "gradients_MB adamw_MB rest_MB model_parts_MB  (run)\n# position 0: the replicated baseline "
                     "(stage 0), measured; DDP by the memory model alone where a grading has no such run\n";
  std::set<int> worlds;
  std::string agreement, world_list;
  double tallest = 0;
  for (const auto& [world, by_stage] : runs) {
    worlds.insert(world);
    world_list += (world_list.empty() ? "" : " ") + std::to_string(world);
    data += fmt::format("# {} rank{}\n", world, world == 1 ? "" : "s");
    if (!by_stage.count(0)) {  // an older grading, without the measured baseline
      const shard::RankMemory ddp = shard::rank_memory(*units, shard::Stage::kOneProcess, world);
      tallest = std::max(tallest, static_cast<double>(ddp.total_bytes()));
      data += fmt::format("0 DDP {:.4f} {:.4f} {:.4f} NaN {:.4f}  # the memory model\n", z::mb(ddp.parameter_bytes),
                          z::mb(ddp.gradient_bytes), z::mb(ddp.optimizer_state_bytes), z::mb(ddp.total_bytes()));
    }
    for (const auto& [stage, r] : by_stage) {
      const json& s = r->results["sharding"];
      const double pieces = 4.0 * number(s, {"shard_elements"}).value_or(0);
      const double parameters = number(s, {"peak_parameter_bytes"}).value_or(0) + (stage == 3 ? pieces : 0.0);
      const double gradients = number(s, {"peak_gradient_bytes"}).value_or(0) + pieces;
      const double adamw = number(s, {"optimizer_state_bytes"}).value_or(0);
      const double peak = number(s, {"peak_tensor_bytes"}).value_or(0);
      // The parts each at its own peak can add up to more than the tensors at the process's.
      const double rest = std::max(0.0, peak - parameters - gradients - adamw);
      const shard::Stage kind = stage <= 1 ? shard::Stage::kZero1 : stage == 2 ? shard::Stage::kZero2 : shard::Stage::kFsdp;
      // Note [The replicated baseline]: ZeRO-1 with one piece per unit, the whole of it.
      const shard::RankMemory model = shard::rank_memory(*units, kind, stage == 0 ? 1 : world);
      // The model's sum of the parts as the kit measures them: the gradient as its meter samples it.
      const double model_parts = static_cast<double>(model.total_bytes() - model.gradient_bytes +
                                                     model.sampled_gradient_bytes);
      const double measured_parts = parameters + gradients + adamw;
      tallest = std::max({tallest, measured_parts + rest, model_parts});
      const char* label = stage == 0 ? "replicated" : stage == 1 ? "ZeRO-1" : stage == 2 ? "ZeRO-2" : "FSDP";
      data += fmt::format("{} {} {:.4f} {:.4f} {:.4f} {:.4f} {:.4f}  # runs/{}\n", stage, label, z::mb(parameters),
                          z::mb(gradients), z::mb(adamw), z::mb(rest), z::mb(model_parts), r->id);
      table.rows.push_back({std::to_string(world), label, fmt::format("{:.2f}", z::mb(parameters)),
                            fmt::format("{:.2f}", z::mb(gradients)), fmt::format("{:.2f}", z::mb(adamw)),
                            fmt::format("{:.2f}", z::mb(rest)), fmt::format("{:.2f}", z::mb(peak)),
                            fmt::format("{:.2f}", z::mb(model_parts)), r->id});
      agreement += fmt::format("{}{} at {}: {:.2f} MB measured, {:.2f} by the model", agreement.empty() ? "" : "; ",
                               label, world, z::mb(measured_parts), z::mb(model_parts));
    }
    data += "\n\n";
  }
  fig.provenance = pv.line(worlds);
  plotter.plot(fig, data, {"worlds=" + gp_string(world_list), fmt::format("ymax={:.4f}", 1.35 * z::mb(tallest))});
  const Run& any = *runs.begin()->second.begin()->second;
  fig.caption = fmt::format(
      "The zero exercise's scaling runs ({}, {} units, {} parameters; a few steps at each stage): rank 0's bytes, "
      "stacked: whole parameters (FSDP: the most gathered at once, and its pieces), gradients (the most held at once "
      "during backward, as the kit's meter sees them at each gradient hook, and the averaged pieces), AdamW's two "
      "moments, and the rest of every CPU tensor alive at the step's peak (activations, flat copies, ring buffers; "
      "counted where LibTorch allocates, report/tensor_bytes.h). Each part is taken at its own peak. The first bars "
      "are the kit's replicated baseline (every rank holds the whole model, gradient and AdamW state, as DDP's ranks "
      "do), run and measured the same way in the same step: what the stages beside it save is what they shard. The "
      "marks are the memory model's sum of the same parts for the kit's reference ({}; the gradient as the meter "
      "samples it: the flat copy and ring buffer of the unit being reduced come and go between two samples). The "
      "global batch ({} rows) is split over the ranks, so each rank's activations shrink with them; the rows are short "
      "so that the state, not the activations, is the larger part. Parts measured against the model: {}.",
      model_name(any.results), units->numel.size(), units->parameters(), "shard/memory_model.h",
      text(any.results, {"config", "global_train_batch_size"}, "?"), agreement);
  return fig;
}

}  // namespace dtlab::grader::report_parts
