// The pipeline across ranks' figures of `grader report` (10 and 11): one step's timeline of the
// stage ranks under GPipe and under 1F1B, and both schedules against the number of micro-batches
// (stored activations, time per step, bubble); see report_parts.h.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "dtlab/pipeline/timeline.h"
#include "report_parts.h"

namespace dtlab::grader::report_parts {
namespace pp_figures {

// The pp timing runs by schedule, then micro-batch count.
std::map<std::string, std::map<int, const Run*>> timing_runs(const Folder& f) {
  std::map<std::string, std::map<int, const Run*>> runs;
  for (const Run& r : f.runs) {
    if (r.purpose != "pp-timing" || !number(r.results, {"timing", "mean_seconds"})) continue;
    const json* p = find(r.results, {"pp"});
    if (!p) continue;
    runs[text(*p, {"schedule"})][static_cast<int>(number(*p, {"micro_batches"}).value_or(0))] = &r;
  }
  return runs;
}

const char* title_of(const std::string& schedule) { return schedule == "gpipe" ? "GPipe" : "1F1B"; }

// "3, 2, 1" from a JSON array of numbers; "?" without one.
std::string joined(const json* values) {
  if (!values || !values->is_array()) return "?";
  std::string out;
  for (const json& v : *values) out += (out.empty() ? "" : ", ") + v.dump();
  return out;
}

}  // namespace pp_figures

Figure pp_timeline_figure(const Folder& f, const Provenance& pv, Plotter& plotter) {
  Figure fig{10, "pp_timeline", "GPT-2 pipeline across ranks: one step of GPipe and of 1F1B"};
  const auto runs = pp_figures::timing_runs(f);
  int m = 0;
  for (int candidate : {8, 4, 2}) {
    if (runs.count("gpipe") && runs.at("gpipe").count(candidate) && runs.count("1f1b") &&
        runs.at("1f1b").count(candidate)) {
      m = candidate;
      break;
    }
  }
  if (m == 0) {
    fig.missing = fmt::format("no finished pp timing runs (purpose \"pp-timing\") of both schedules at the same "
                              "micro-batch count in {}", (f.dir / "runs").string());
    return fig;
  }
  std::string data;
  std::string notes;
  double span = 0;
  int stages = 2;
  for (const char* schedule : {"gpipe", "1f1b"}) {
    const Run& r = *runs.at(schedule).at(m);
    const json* timeline = find(r.results, {"pp", "timeline"});
    const json* events = timeline ? find(*timeline, {"events"}) : nullptr;
    if (!events || !events->is_array() || events->empty()) {
      fig.missing = fmt::format("runs/{}: results.json holds no timeline of the stage ranks", r.id);
      return fig;
    }
    stages = static_cast<int>(number(*timeline, {"stages"}).value_or(2));
    span = std::max(span, number(*timeline, {"span"}).value_or(0));
    data += fmt::format("# {}: step {} of runs/{}\n# stage start_ms end_ms micro pass(0 forward, 1 backward)\n",
                        pp_figures::title_of(schedule), text(r.results, {"pp", "timeline_step"}, "?"), r.id);
    for (const json& e : *events) {
      data += fmt::format("{} {:.3f} {:.3f} {} {}\n", text(e, {"stage"}), 1e3 * number(e, {"start"}).value_or(0),
                          1e3 * number(e, {"end"}).value_or(0), text(e, {"micro"}),
                          text(e, {"pass"}) == "backward" ? 1 : 0);
    }
    data += "\n\n";
    notes += fmt::format("{} {}: span {:.1f} ms, bubble {:.2f}, peak micro-batches stored per stage rank [{}]; ",
                         pp_figures::title_of(schedule), r.id, 1e3 * number(*timeline, {"span"}).value_or(0),
                         number(*timeline, {"bubble_fraction"}).value_or(0),
                         pp_figures::joined(find(r.results, {"pp", "peak_stored_micro_batches"})));
  }
  fig.provenance = pv.line({stages});
  plotter.plot(fig, data, {fmt::format("stages={}", stages), fmt::format("span={:.3f}", 1e3 * span),
                           "run=" + gp_string(fmt::format("{} stage ranks x {} micro-batches", stages, m))});
  fig.caption = fmt::format(
      "One training step of the pp timing runs at {} micro-batches over {} stage ranks, each rank a process: every "
      "forward (blue) and backward (orange) as the rank ran it, on the system clock the ranks share, labelled with "
      "its micro-batch. Top: GPipe runs every forward, then every backward, so each rank holds all {} micro-batches' "
      "activations at its peak. Bottom: 1F1B alternates one forward and one backward after a warm-up of n - s - 1 "
      "forwards, so rank s holds at most n - s. Between the boxes a rank waits for a neighbour's activation or "
      "gradient. {}",
      m, stages, m, notes);
  return fig;
}

Figure pp_schedules_figure(const Folder& f, const Provenance& pv, Plotter& plotter) {
  Figure fig{11, "pp_schedules", "GPT-2 pipeline across ranks: GPipe and 1F1B against the micro-batches"};
  const auto runs = pp_figures::timing_runs(f);
  if (!runs.count("gpipe") || !runs.count("1f1b") || runs.at("gpipe").size() < 2 || runs.at("1f1b").size() < 2) {
    fig.missing = fmt::format("fewer than two finished pp timing runs of each schedule (purpose \"pp-timing\") in {}",
                              (f.dir / "runs").string());
    return fig;
  }
  std::string data;
  int stages = 2;
  for (const char* schedule : {"gpipe", "1f1b"}) {
    data += fmt::format("# {}: m ms_per_step measured_bubble ideal_bubble stage0_peak_micro stage0_peak_MB  (run)\n",
                        pp_figures::title_of(schedule));
    for (const auto& [m, r] : runs.at(schedule)) {
      const json& p = r->results["pp"];
      stages = static_cast<int>(number(p, {"stages"}).value_or(2));
      // Held, not only stored (Note [Held, not only stored]): what stage 0's process kept alive.
      // Runs from before the runtime measured it have only the stored count.
      const json* peaks = find(p, {"peak_held_micro_batches"});
      if (!peaks) peaks = find(p, {"peak_stored_micro_batches"});
      const json* bytes = find(p, {"peak_activation_bytes"});
      data += fmt::format("{} {:.3f} {:.4f} {:.4f} {} {:.4f}  # runs/{}\n", m,
                          1e3 * number(r->results, {"timing", "mean_seconds"}).value_or(0),
                          number(p, {"timeline", "bubble_fraction"}).value_or(0),
                          pipeline::ideal_bubble_fraction(m, stages),
                          peaks && !peaks->empty() ? peaks->at(0).get<int>() : 0,
                          bytes && !bytes->empty() ? bytes->at(0).get<double>() / 1e6 : 0.0, r->id);
    }
    data += "\n\n";
  }
  // What was run, from the runs themselves: their micro-batch counts and the pipeline's batch.
  std::vector<int> counts;
  for (const auto& [m, r] : runs.at("gpipe")) counts.push_back(m);
  const Run& any = *runs.at("gpipe").begin()->second;
  fig.provenance = pv.line({stages});
  plotter.plot(fig, data, {fmt::format("stages={}", stages)});
  fig.caption = fmt::format(
      "The pp timing runs: {} stage ranks, GPipe and 1F1B at {} micro-batches ({}, batch {}). "
      "Left: the micro-batches whose activations stage 0 held at once, as the runtime measured them (stored, or alive "
      "in a send not yet waited for): GPipe's grow with m, 1F1B's stop at n. Middle: milliseconds per step. Right: the idle share of the ranks on one step's timeline "
      "against (n-1)/(m+n-1), the bubble both schedules share when every action takes the same time: 1F1B saves "
      "memory, not time. The ranks share this machine's cores, so their compute does not add up as on separate "
      "machines.",
      stages, fmt::join(counts, ", "), model_name(any.results),
      text(any.results, {"config", "per_rank_train_batch_size"}, "?"));
  return fig;
}

}  // namespace dtlab::grader::report_parts
