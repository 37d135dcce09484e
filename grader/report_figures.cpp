// The figures of `grader report`: for each, a data file, a gnuplot run on its template in plots/,
// and a caption; see report_parts.h.
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dtlab/core/error.h"
#include "dtlab/tooling/process.h"
#include "dtlab/io/file.h"
#include "report_parts.h"

namespace dtlab::grader::report_parts {

std::string gp_string(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

namespace {

// A series title inside a gnuplot word list ("a b" "c d"): double quotes would end it.
std::string gp_word(std::string s) {
  std::replace(s.begin(), s.end(), '"', '\'');
  return "\"" + s + "\"";
}

// "task2a, task2b and task3"; one name as it is.
std::string and_list(const std::vector<std::string>& names) {
  if (names.size() < 2) return names.empty() ? "" : names[0];
  return fmt::format("{} and {}", fmt::join(names.begin(), names.end() - 1, ", "), names.back());
}

}  // namespace

void Plotter::plot(Figure& fig, const std::string& data, const std::vector<std::string>& vars) {
  const fs::path script = options.plots_dir / ((fig.template_name.empty() ? fig.name : fig.template_name) + ".gp");
  if (!fs::is_regular_file(script))
    throw Error(fmt::format("{}: no such gnuplot template (ReportOptions::plots_dir should be the "
                            "repository's plots/)", script.string()));
  const fs::path datafile = out_dir / "data" / (fig.name + ".dat");
  io::write_file_atomically(datafile, data);
  // gnuplot writes a partial file; renamed into place only when it succeeded.
  fig.svg = out_dir / "figures" / (fig.name + ".svg");
  const fs::path partial = fig.svg.string() + ".partial";
  fs::create_directories(fig.svg.parent_path());
  fs::remove(partial);
  std::string assignments = fmt::format("datafile={}; outfile={}; provenance={}", gp_string(datafile.string()),
                                        gp_string(partial.string()), gp_string(fig.provenance));
  for (const std::string& v : vars) assignments += "; " + v;
  ProcessResult r;
  try {
    r = run_process({options.gnuplot, "-e", assignments, script.string()}, kGnuplotTimeoutSeconds);
  } catch (const Error& e) {  // not installed: seen on a GPU node that never ran scripts/setup.sh
    throw Error(fmt::format("figure {}: {}: the report draws its figures with gnuplot (Debian: `sudo apt install "
                            "gnuplot-nox`; scripts/setup.sh installs it)", fig.number, e.what()));
  }
  if (r.timed_out || r.exit_code != 0 || !fs::is_regular_file(partial) || fs::file_size(partial) == 0) {
    fs::remove(partial);
    throw Error(fmt::format("{} {} for figure {} {}:\n{}", options.gnuplot, script.string(), fig.number,
                            r.timed_out ? fmt::format("timed out after {:g} s", kGnuplotTimeoutSeconds)
                            : r.exit_code != 0 ? fmt::format("failed (exit {})", r.exit_code)
                                               : "wrote no figure",
                            r.output));
  }
  if (!r.output.empty()) {  // warnings: the figure may be off, say so
    size_t at = r.output.find("warning:");
    at = at == std::string::npos ? 0 : r.output.rfind('\n', at) + 1;  // npos + 1 == 0
    notes.push_back(fmt::format("gnuplot, figure {}: {}", fig.number, r.output.substr(at, r.output.find('\n', at) - at)));
  }
  fs::rename(partial, fig.svg);
  written.push_back(fig.svg);
}

std::string ms(double seconds) { return fmt::format("{:.1f}", seconds * 1e3); }

// Figure 1 and the timing table.
Figure timing_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table) {
  Figure fig{1, "timing", "Time per iteration vs number of ranks"};
  std::map<std::string, std::map<int, const Run*>> runs;  // exercise -> ranks -> run
  for (const Run& r : f.runs) {
    if (r.purpose != "timing" ||
        std::find(kTimedExercises.begin(), kTimedExercises.end(), r.exercise) == kTimedExercises.end())
      continue;
    if (!number(r.results, {"timing", "mean_seconds"})) {
      plotter.notes.push_back(fmt::format("{}: no timing.mean_seconds, left out of figure 1", r.results_path.string()));
      continue;
    }
    if (!runs[r.exercise].emplace(r.world, &r).second)
      plotter.notes.push_back(fmt::format("two timing runs of {} at {} ranks: figure 1 shows the first, not {}",
                                          r.exercise, r.world, r.id));
  }
  if (runs.empty()) {
    fig.missing = fmt::format("no finished timing runs (purpose \"timing\") of {} in {}", fmt::join(kTimedExercises, ", "),
                              (f.dir / "runs").string());
    return fig;
  }
  table = {"Time per iteration and throughput (timing runs)",
           {"exercise", "ranks", "ms / iteration (± stdev)", "communication ms", "tokens/s (all ranks)", "run"},
           "lrrrrl", {}};
  std::string data = "# Figure 1: time per iteration vs ranks, one block (gnuplot index) per exercise of `series`\n"
                     "# ranks ms_per_iteration stdev_ms comm_ms tokens_per_second_all_ranks  (run)\n";
  std::string series;
  std::vector<std::string> timed;
  std::set<int> ranks;
  const Run* best = nullptr;
  for (const auto& [exercise, by_ranks] : runs) {
    series += (series.empty() ? "" : " ") + exercise;
    timed.push_back(exercise);
    data += "# " + exercise + "\n";
    for (const auto& [world, r] : by_ranks) {
      const json& t = r->results["timing"];
      const double mean = number(t, {"mean_seconds"}).value(), stdev = number(t, {"stdev_seconds"}).value_or(0),
                   comm = number(t, {"mean_comm_seconds"}).value_or(0),
                   tokens = number(t, {"tokens_per_second"}).value_or(0);
      data += fmt::format("{} {:.4f} {:.4f} {:.4f} {:.1f}  # runs/{}\n", world, mean * 1e3, stdev * 1e3, comm * 1e3,
                          tokens, r->id);
      table.rows.push_back({exercise, std::to_string(world), fmt::format("{} ± {}", ms(mean), ms(stdev)), ms(comm),
                            fmt::format("{:.0f}", tokens), r->id});
      ranks.insert(world);
      if (!best || tokens > number(best->results, {"timing", "tokens_per_second"}).value_or(0)) best = r;
    }
    data += "\n\n";
  }
  fig.provenance = pv.line(ranks);
  plotter.plot(fig, data, {"series=" + gp_string(series)});
  const json& t = best->results["timing"];
  fig.caption = fmt::format(
      "Mean time per training iteration against the number of ranks (solid; error bars ±1 standard deviation over "
      "{} iterations after {} warm-up), and the part of it spent waiting for gradient communication (dashed, same "
      "colour). Global batch {} examples, max_seq_length {}. Highest throughput: {} with {} tokens/s summed over "
      "ranks; every run's is in the timing table. What this measures: every rank on this one machine, sharing its "
      "cores and talking over loopback, so computation and small-message latency decide; it is not scaling on a "
      "cluster{} (figure 9, sudo make cluster-demo, times {} over rate-limited links).",
      text(t, {"count"}, "?"), text(t, {"discarded"}, "?"),
      text(best->results, {"config", "global_train_batch_size"}, "?"),
      text(best->results, {"config", "max_seq_length"}, "?"), best->label(),
      fmt::format("{:.0f}", number(t, {"tokens_per_second"}).value_or(0)),
      // Only the exercises graded have runs (Note [What a report shows] in report.cpp): name those.
      timed.size() > 1 ? fmt::format(", and the order of {} here is not the assignment's", and_list(timed)) : "",
      timed.size() > 1 ? "them" : and_list(timed));
  return fig;
}

// Figure 2: loss curves of the data-parallel runs over the reference run's.
Figure loss_figure(const Folder& f, const Provenance& pv, Plotter& plotter) {
  Figure fig{2, "losses", "Training loss: data-parallel runs vs the single-process reference"};
  const Run* reference = nullptr;
  std::vector<const Run*> variants;
  for (const Run& r : f.runs) {
    if (r.purpose == "reference" && !reference) reference = &r;
    if (r.purpose == "losses") variants.push_back(&r);
  }
  const fs::path runs = f.dir / "runs";
  if (!reference || variants.empty()) {
    fig.missing = !reference ? fmt::format("no finished reference run (purpose \"reference\") in {} to compare the "
                                           "losses with", runs.string())
                             : fmt::format("no finished losses runs (purpose \"losses\") in {}", runs.string());
    return fig;
  }
  std::stable_sort(variants.begin(), variants.end(), [](const Run* a, const Run* b) {
    return std::tie(a->exercise, a->world) < std::tie(b->exercise, b->world);
  });
  std::vector<const Run*> all = {reference};
  all.insert(all.end(), variants.begin(), variants.end());
  std::map<int64_t, std::vector<std::optional<double>>> losses;  // step -> loss of each of `all`
  for (size_t i = 0; i < all.size(); ++i) {
    const json* its = find(all[i]->results, {"iterations"});
    if (!its || !its->is_array() || its->empty())
      plotter.notes.push_back(fmt::format("{}: no iterations, so no loss curve", all[i]->results_path.string()));
    for (const json& it : its && its->is_array() ? *its : json::array()) {
      const auto step = number(it, {"step"}), loss = number(it, {"loss"});
      if (!step || !loss) continue;
      auto& row = losses[int64_t(*step)];
      row.resize(all.size());
      row[i] = *loss;
    }
  }
  if (losses.empty()) {
    fig.missing = "the reference and losses runs recorded no losses (results.json \"iterations\")";
    return fig;
  }
  std::string data = "# Figure 2: training loss per step; a column per run, ? where a run has no such step\n# step";
  std::string titles;
  std::set<int> ranks;
  for (const Run* r : all) {
    data += " " + r->id;
    titles += (titles.empty() ? "" : " ") + gp_word(r == reference ? "reference (" + ranks_text(r->world) + ")" : r->label());
    ranks.insert(r->world);
  }
  data += "\n";
  std::vector<double> max_diff(all.size(), 0);
  std::vector<int> compared(all.size(), 0);
  for (auto& [step, row] : losses) {
    row.resize(all.size());
    data += std::to_string(step);
    for (size_t i = 0; i < all.size(); ++i) {
      data += row[i] ? fmt::format(" {:.9g}", *row[i]) : std::string(" ?");
      if (i > 0 && row[i] && row[0]) {
        max_diff[i] = std::max(max_diff[i], std::abs(*row[i] - *row[0]));
        ++compared[i];
      }
    }
    data += "\n";
  }
  fig.provenance = pv.line(ranks);
  plotter.plot(fig, data, {"titles=" + gp_string(titles),
                           fmt::format("maxdiff={:.6g}", *std::max_element(max_diff.begin(), max_diff.end()))});
  std::string diffs;
  for (size_t i = 1; i < all.size(); ++i)
    diffs += fmt::format("{}{} {:.2g} over {} steps", i > 1 ? "; " : "", all[i]->label(), max_diff[i], compared[i]);
  fig.caption = fmt::format(
      "Training loss per step of the kit's single-process reference run (grey line) and of each data-parallel run "
      "(markers; dropout {}, seed {}, global batch {}). The curves should coincide, so each run has its own marker "
      "size; the lower panel shows each run's loss minus the reference loss. Largest |loss − reference|: {}.",
      text(reference->results, {"config", "dropout"}, "?"), text(reference->results, {"config", "seed"}, "?"),
      text(variants[0]->results, {"config", "global_train_batch_size"}, "?"), diffs);
  return fig;
}

// Figure 3 and the traffic table: task 4's expected vs measured bytes.
Figure traffic_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table) {
  Figure fig{3, "traffic", "Network traffic: expected vs measured"};
  const Run* run = nullptr;
  for (const Run& r : f.runs) {
    if (r.purpose != "traffic") continue;
    const json* t = find(r.results, {"traffic"});
    if (!t || !t->is_array() || t->empty())
      plotter.notes.push_back(fmt::format("{}: no traffic measurements, left out of figure 3", r.results_path.string()));
    else if (run)
      plotter.notes.push_back(fmt::format("figure 3 shows traffic run {}, not {}", run->id, r.id));
    else
      run = &r;
  }
  if (!run) {
    fig.missing = fmt::format("no finished traffic run (purpose \"traffic\") in {}", (f.dir / "runs").string());
    return fig;
  }
  table = {"Bytes sent, expected and measured (run " + run->id + ")",
           {"global batch", "steps", "expected MB", "measured MB", "measured / expected"}, "rrrrr", {}};
  std::string data = "# Figure 3: bytes sent on the interface by this host's ranks, from runs/" + run->id +
                     "\n# global_batch_size iterations expected_MB measured_MB ratio_measured_to_expected\n";
  bool whole_epochs = number(run->results, {"config", "max_steps"}).value_or(-1) <= 0;
  for (const json& m : run->results["traffic"]) {
    const double batch = number(m, {"global_batch_size"}).value_or(0), its = number(m, {"iterations"}).value_or(0);
    const double expected = number(m, {"expected_bytes_this_host"}).value_or(NAN) / 1e6;
    const double measured = number(m, {"measured_tx_bytes"}).value_or(NAN) / 1e6;
    const double ratio = number(m, {"ratio_measured_to_expected"}).value_or(measured / expected);
    data += fmt::format("{:g} {:g} {:.3f} {:.3f} {:.5f}\n", batch, its, expected, measured, ratio);
    table.rows.push_back({fmt::format("{:g}", batch), fmt::format("{:g}", its), fmt::format("{:.1f}", expected),
                          fmt::format("{:.1f}", measured), fmt::format("{:.4f}", ratio)});
  }
  fig.provenance = pv.line({run->world});
  plotter.plot(fig, data, {});
  const json* env = find(run->results, {"environment"});
  if (!env) env = &run->results;  // no environment: the fields read below fall back to "?"
  fig.caption = fmt::format(
      "Bytes sent on interface {} by the {} on this host ({} in all) during {} at each global batch "
      "size. Expected: steps × the sum over each step's all-reduces of 2(n−1)/n × their bytes, × the ranks on this "
      "host; measured: the interface's transmit counter (packet headers included). The number above each pair is "
      "measured / expected. MB = 10⁶ bytes.",
      text(*env, {"interface"}, "?"), ranks_text(number(*env, {"ranks_on_this_host"}).value_or(run->world)),
      ranks_text(run->world),
      whole_epochs ? "one epoch" : "the first --max_steps steps");
  return fig;
}

// Figure 4 and its table: task 3's time per iteration against DDP's bucket cap.
Figure sweep_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table) {
  Figure fig{4, "sweep", "DDP bucket-cap sweep"};
  std::map<double, const Run*> runs;  // cap -> run
  for (const Run& r : f.runs) {
    if (r.purpose != "bucket-sweep") continue;
    const auto cap = number(r.results, {"config", "bucket_cap_mb"});
    if (!cap || !number(r.results, {"timing", "mean_seconds"}))
      plotter.notes.push_back(fmt::format("{}: no config.bucket_cap_mb or timing, left out of figure 4",
                                          r.results_path.string()));
    else if (!runs.emplace(*cap, &r).second)
      plotter.notes.push_back(fmt::format("two bucket-sweep runs with a {:g} MB cap: figure 4 shows the first, not {}",
                                          *cap, r.id));
  }
  if (runs.empty()) {
    fig.missing = fmt::format("no finished bucket-sweep runs (purpose \"bucket-sweep\") in {}", (f.dir / "runs").string());
    return fig;
  }
  table = {"DDP bucket-cap sweep (task3)",
           {"bucket cap MB", "buckets", "ranks", "ms / iteration (± stdev)", "waiting ms"}, "rrrrr", {}};
  std::string data = "# Figure 4: task3 time per iteration vs DDP bucket cap\n"
                     "# bucket_cap_mb ms_per_iteration stdev_ms comm_ms buckets  (run)\n";
  std::set<int> ranks;
  for (const auto& [cap, r] : runs) {
    const json& t = r->results["timing"];
    const json* buckets = find(r->results, {"communication", "ddp_buckets"});
    const std::string n = buckets && buckets->is_array() ? std::to_string(buckets->size()) : "?";
    const double mean = number(t, {"mean_seconds"}).value(), stdev = number(t, {"stdev_seconds"}).value_or(0),
                 comm = number(t, {"mean_comm_seconds"}).value_or(0);
    data += fmt::format("{:g} {:.4f} {:.4f} {:.4f} {}  # runs/{}\n", cap, mean * 1e3, stdev * 1e3, comm * 1e3, n, r->id);
    table.rows.push_back({fmt::format("{:g}", cap), n, std::to_string(r->world),
                          fmt::format("{} ± {}", ms(mean), ms(stdev)), ms(comm)});
    ranks.insert(r->world);
  }
  fig.provenance = pv.line(ranks);
  plotter.plot(fig, data, {});
  fig.caption = fmt::format(
      "task3 (DistributedDataParallel) with {}: mean time per iteration (error bars ±1 standard deviation) "
      "and the part spent waiting for gradient buckets after backward, against the bucket cap (log scale). Under "
      "each cap: the number of buckets it gives. Numbers in the bucket-cap table.",
      ranks.size() == 1 ? ranks_text(*ranks.begin()) : fmt::format("{} ranks", fmt::join(ranks, ", ")));
  return fig;
}

}  // namespace dtlab::grader::report_parts
