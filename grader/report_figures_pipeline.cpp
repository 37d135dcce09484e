// The pipeline exercise's figures of `grader report` (7 and 8): the modes side by side with the
// bubble and activation memory against micro-batches, and one step's timeline of the stages; see
// report_parts.h.
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "dtlab/pipeline/timeline.h"
#include "report_parts.h"

namespace dtlab::grader::report_parts {
namespace pipeline_figures {

// The pipeline timing runs by micro-batch count (1: model parallel; 0: single stage).
std::map<int, const Run*> timing_runs(const Folder& f) {
  std::map<int, const Run*> runs;
  for (const Run& r : f.runs) {
    if (r.purpose != "pipeline-timing" || !number(r.results, {"timing", "mean_seconds"})) continue;
    const json* p = find(r.results, {"pipeline"});
    runs.emplace(p ? static_cast<int>(number(*p, {"micro_batches"}).value_or(1)) : 0, &r);
  }
  return runs;
}

// A bar's label: one word (gnuplot reads the data file's columns at spaces).
std::string mode_label(int m) { return m == 0 ? "single" : m == 1 ? "model-par." : fmt::format("m={}", m); }

}  // namespace pipeline_figures

Figure pipeline_modes_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table) {
  Figure fig{7, "pipeline_modes", "GPT-2 pipeline parallel: modes, bubble and activation memory"};
  const auto runs = pipeline_figures::timing_runs(f);
  if (runs.size() < 3 || !runs.count(0) || !runs.count(1)) {
    fig.missing = fmt::format("no finished pipeline timing runs of single stage, model parallel and pipeline "
                              "(purpose \"pipeline-timing\") in {}", (f.dir / "runs").string());
    return fig;
  }
  table = {"GPT-2 pipeline parallel (pipeline): modes (timing runs, one process)",
           {"mode", "stages", "micro-batches", "ms / step", "s / epoch", "tokens/s", "bubble", "GPipe's bubble",
            "peak activations per stage (MB)", "run"},
           "lrrrrrrrll", {}};
  std::string modes = "# Figure 7: the pipeline exercise's modes\n# position label ms_per_step tokens_per_second  (run)\n";
  std::string per_m = "# m measured_bubble ideal_bubble stage0_peak_MB stage1_peak_MB  (run)\n";
  int position = 0, stages = 1;
  for (const auto& [m, r] : runs) {
    const json& t = r->results["timing"];
    const double mean = number(t, {"mean_seconds"}).value(), tokens = number(t, {"tokens_per_second"}).value_or(0);
    // An epoch of the training pairs at this step time.
    const double batch = number(r->results, {"config", "per_rank_train_batch_size"}).value_or(0),
                 pairs = number(r->results, {"config", "train_pairs"}).value_or(0);
    const std::string epoch = batch > 0 ? fmt::format("{:.1f}", mean * std::ceil(pairs / batch)) : "-";
    modes += fmt::format("{} {} {:.3f} {:.1f}  # runs/{}\n", position++, pipeline_figures::mode_label(m),
                         mean * 1e3, tokens, r->id);
    std::vector<std::string> row = {m == 0 ? "single stage" : m == 1 ? "model parallel" : "pipeline", "1", "-",
                                    ms(mean), epoch, fmt::format("{:.0f}", tokens), "-", "-", "-", r->id};
    if (const json* p = find(r->results, {"pipeline"})) {
      stages = static_cast<int>(number(*p, {"stages"}).value_or(2));
      const double bubble = number(*p, {"mean_bubble_fraction"}).value_or(0);
      const double ideal = pipeline::ideal_bubble_fraction(m, stages);
      std::vector<double> peak_mb;
      std::string peaks;
      if (const json* peak = find(*p, {"peak_activation_bytes"})) {
        for (const json& b : *peak) {
          peak_mb.push_back(b.get<double>() / 1e6);
          peaks += fmt::format("{}{:.2f}", peaks.empty() ? "" : ", ", peak_mb.back());
        }
      }
      peak_mb.resize(2, 0.0);
      per_m += fmt::format("{} {:.4f} {:.4f} {:.4f} {:.4f}  # runs/{}\n", m, bubble, ideal, peak_mb[0], peak_mb[1], r->id);
      row = {m == 1 ? "model parallel" : "pipeline", std::to_string(stages), std::to_string(m), ms(mean), epoch,
             fmt::format("{:.0f}", tokens), fmt::format("{:.2f}", bubble), fmt::format("{:.2f}", ideal), peaks, r->id};
    }
    table.rows.push_back(row);
  }
  fig.provenance = pv.line({1});
  plotter.plot(fig, modes + "\n\n" + per_m, {});
  const Run& single = *runs.at(0);
  fig.caption = fmt::format(
      "The pipeline exercise's timing runs: GPT-2 ({}) on the translation fixture, batch {}, in one process. Left: "
      "milliseconds per step of a single stage, of model parallelism ({} stages taking turns, 1 micro-batch) and of "
      "the pipeline at 2, 4 and 8 micro-batches. Middle: the share of the stages' time spent idle, measured from "
      "every task's start and end, against GPipe's (n-1)/(m+n-1), at m micro-batches (m = 1: model parallel). "
      "Right: the most bytes of stage inputs and outputs each stage held at once: GPipe keeps every micro-batch's "
      "until its backward, so the total is the whole batch's whatever m (re-computing them in backward, GPipe's "
      "re-materialisation, is what would lower it). The stages are threads sharing this "
      "machine's cores, each with its share of them: on a small model the hand-off of each task is a visible part "
      "of the step.",
      model_name(single.results), text(single.results, {"config", "per_rank_train_batch_size"}, "?"), stages);
  return fig;
}

Figure pipeline_timeline_figure(const Folder& f, const Provenance& pv, Plotter& plotter) {
  Figure fig{8, "pipeline_timeline", "GPT-2 pipeline parallel: one step's timeline of the stages"};
  const auto runs = pipeline_figures::timing_runs(f);
  const Run* run = nullptr;
  for (int m : {4, 8, 2}) {
    if (runs.count(m)) {
      run = runs.at(m);
      break;
    }
  }
  const json* timeline = run ? find(run->results, {"pipeline", "timeline"}) : nullptr;
  const json* events = timeline ? find(*timeline, {"events"}) : nullptr;
  if (!events || !events->is_array() || events->empty()) {
    fig.missing = fmt::format("no finished pipeline timing run with micro-batches (purpose \"pipeline-timing\") "
                              "whose results.json holds a timeline in {}", (f.dir / "runs").string());
    return fig;
  }
  const int stages = static_cast<int>(number(*timeline, {"stages"}).value_or(2));
  const int m = static_cast<int>(number(run->results, {"pipeline", "micro_batches"}).value_or(0));
  std::string data = fmt::format("# Figure 8: step {} of runs/{}\n# stage start_ms end_ms micro pass(0 forward, 1 "
                                 "backward)\n", text(run->results, {"pipeline", "timeline_step"}, "?"), run->id);
  for (const json& e : *events) {
    data += fmt::format("{} {:.3f} {:.3f} {} {}\n", text(e, {"stage"}), 1e3 * number(e, {"start"}).value_or(0),
                        1e3 * number(e, {"end"}).value_or(0), text(e, {"micro"}),
                        text(e, {"pass"}) == "backward" ? 1 : 0);
  }
  fig.provenance = pv.line({1});
  const std::string label = fmt::format("{} stages x {} micro-batches", stages, m);
  plotter.plot(fig, data, {fmt::format("stages={}", stages), "run=" + gp_string(label)});
  fig.caption = fmt::format(
      "Step {} of the pipeline timing run with {} ({}): every task as its stage's worker ran it, forward (blue) "
      "then backward (orange), labelled with its micro-batch. The diagonal fill at the start and drain at the end "
      "are the bubble; between them both stages work at once. Measured bubble of this step: {:.2f}; GPipe's "
      "(n-1)/(m+n-1): {:.2f}.",
      text(run->results, {"pipeline", "timeline_step"}, "?"), label, run->id,
      number(*timeline, {"bubble_fraction"}).value_or(0), pipeline::ideal_bubble_fraction(std::max(m, 1), stages));
  return fig;
}

}  // namespace dtlab::grader::report_parts
