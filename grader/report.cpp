// `grader report`, see report.h. Reads the results folder, then builds each figure (a data file,
// a gnuplot run, a caption), then writes one report model twice: Markdown and HTML.
#include "report.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "dtlab/core/error.h"
#include "dtlab/core/subprocess.h"
#include "dtlab/io/file.h"
#include "dtlab/io/json_file.h"

namespace dtlab::grader {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kGnuplotTimeoutSeconds = 60;
const std::vector<std::string> kTimedExercises = {"task2a", "task2b", "task3"};
const std::set<std::string> kPurposes = {"timing", "losses", "reference", "bucket-sweep", "traffic"};

// ---- Reading JSON leniently: a missing field is reported by the caller, never a crash.

const json* find(const json& j, std::initializer_list<const char*> keys) {
  const json* at = &j;
  for (const char* k : keys) {
    if (!at->is_object() || !at->contains(k)) return nullptr;
    at = &(*at)[k];
  }
  return at;
}
std::optional<double> number(const json& j, std::initializer_list<const char*> keys) {
  const json* v = find(j, keys);
  return v && v->is_number() ? std::optional<double>(v->get<double>()) : std::nullopt;
}
std::string text(const json& j, std::initializer_list<const char*> keys, const std::string& fallback = "") {
  const json* v = find(j, keys);
  if (!v || v->is_null()) return fallback;
  return v->is_string() ? v->get<std::string>() : v->dump();
}

std::string ranks_text(double n) { return fmt::format("{:g} rank{}", n, n == 1 ? "" : "s"); }

struct Run {
  std::string id, exercise, purpose;
  int world = 1;
  fs::path results_path;
  json results;  // the run's results.json ("dtlab.results/1")
  std::string label() const { return exercise + " (" + ranks_text(world) + ")"; }
};

struct Folder {
  fs::path dir;
  json top;               // results.json (Gradescope's format)
  std::vector<Run> runs;  // finished runs of the purposes the report uses, by id
};

Folder load_folder(const fs::path& dir, std::vector<std::string>& notes) {
  Folder f;
  f.dir = dir;
  const fs::path top = dir / "results.json";
  if (!fs::is_regular_file(top))
    throw Error(fmt::format("{}: no such file, so {} is not a grading results folder (`grader check` "
                            "writes one)", top.string(), dir.string()));
  f.top = io::read_json_file(top);
  if (!f.top.is_object())
    throw Error(top.string() + ": expected a JSON object (Gradescope's results format)");
  const fs::path runs = dir / "runs";
  if (!fs::is_directory(runs)) {
    notes.push_back(fmt::format("{} does not exist: no run to plot", runs.string()));
    return f;
  }
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(runs))
    if (e.is_directory()) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  for (const fs::path& d : dirs) {
    const fs::path record = d / "run.json";
    if (!fs::is_regular_file(record)) {
      notes.push_back(fmt::format("{} is missing: that run is left out", record.string()));
      continue;
    }
    const json r = io::read_json_file(record);
    if (!r.is_object()) throw Error(record.string() + ": expected a JSON object (the run's record)");
    Run run;
    run.id = text(r, {"id"}, d.filename().string());
    run.exercise = text(r, {"exercise"});
    run.purpose = text(r, {"purpose"});
    if (!kPurposes.count(run.purpose)) continue;  // other checks' runs: not plotted
    const std::string outcome = text(r, {"outcome"}, "missing");
    if (outcome != "ok") {
      const std::string message = text(r, {"message"});
      notes.push_back(fmt::format("run {} ({}, {}) did not finish (outcome \"{}\"{}): left out", run.id, run.exercise,
                                  run.purpose, outcome, message.empty() ? "" : ": " + message.substr(0, message.find('\n'))));
      continue;
    }
    // Rank 0's results.json, copied next to run.json or where the run's --output_dir put it.
    run.results_path = d / "results.json";
    if (!fs::is_regular_file(run.results_path) && fs::is_regular_file(d / "output" / "results.json"))
      run.results_path = d / "output" / "results.json";
    if (!fs::is_regular_file(run.results_path)) {
      notes.push_back(fmt::format("run {} finished but {} is missing: left out", run.id,
                                  run.results_path.string()));
      continue;
    }
    run.results = io::read_json_file(run.results_path);
    if (!run.results.is_object())
      throw Error(run.results_path.string() + ": expected a JSON object (schema dtlab.results/1)");
    run.world = int(number(r, {"world_size"})
                        .value_or(number(run.results, {"environment", "world_size"}).value_or(1)));
    f.runs.push_back(std::move(run));
  }
  return f;
}

// ---- Provenance: from results.json's extra_data, filled in from the runs where it is silent.

struct Provenance {
  std::string commit, libtorch, backend, host, cpu, cores, seed, date, submission;
  bool dirty = false;

  // The footer of a figure whose runs had `ranks` ranks.
  std::string line(const std::set<int>& ranks) const {
    std::string r;
    for (int n : ranks) r += (r.empty() ? "" : ", ") + std::to_string(n);
    r += ranks.size() == 1 && *ranks.begin() == 1 ? " rank" : " ranks";
    return fmt::format("dtlab {}{} · LibTorch {}, {} · {} · seed {} · {}: {} cores, {}", commit,
                       dirty ? " (dirty)" : "", libtorch, backend, r, seed, host, cores, cpu);
  }
};

Provenance provenance(const Folder& f, std::vector<std::string>& notes) {
  static const json kEmpty = json::object();
  const json* p = find(f.top, {"extra_data", "provenance"});
  if (!p || !p->is_object()) {
    notes.push_back(fmt::format("{}: no extra_data.provenance, so the provenance shown comes from the "
                                "runs and may be incomplete", (f.dir / "results.json").string()));
    p = &kEmpty;
  }
  // A run that has an environment with a hostname (task 4's has none) fills the gaps.
  const json* env = &kEmpty;
  const json* config = &kEmpty;
  for (const Run& r : f.runs)
    if (find(r.results, {"environment", "hostname"})) {
      env = find(r.results, {"environment"});
      config = find(r.results, {"config"});
      break;
    }
  Provenance v;
  v.commit = text(*p, {"commit"}, "(commit unknown)");
  v.dirty = text(*p, {"dirty"}) == "true";
  v.libtorch = text(*p, {"libtorch"}, text(*env, {"libtorch"}, "?"));
  v.backend = text(*p, {"backend"}, text(*env, {"backend"}, "?"));
  v.host = text(*p, {"hostname"}, text(*env, {"hostname"}, "?"));
  v.cpu = text(*p, {"cpu"}, "CPU unknown");
  v.cores = text(*p, {"cores"}, "?");
  v.seed = text(*p, {"seed"}, text(*config, {"seed"}, "?"));
  v.date = text(*p, {"date"}, "?");
  v.submission = text(*p, {"submission"});
  return v;
}

// ---- Figures

struct Figure {
  Figure(int n, std::string file_name, std::string heading) : number(n), name(file_name), title(heading) {}
  int number = 0;
  std::string name, title;  // name: the template plots/<name>.gp and the files <name>.svg/.dat
  std::string caption;      // set when drawn
  std::string missing;      // set when left out: why
  std::string provenance;
  fs::path svg;             // set when drawn
};

struct Table {
  std::string title;
  std::vector<std::string> header;
  std::string align;  // one letter per column: l or r
  std::vector<std::vector<std::string>> rows;
};

// A string as a gnuplot string literal: single quotes, where only '' needs escaping.
std::string gp_string(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// A series title inside a gnuplot word list ("a b" "c d"): double quotes would end it.
std::string gp_word(std::string s) {
  std::replace(s.begin(), s.end(), '"', '\'');
  return "\"" + s + "\"";
}

struct Plotter {
  const ReportOptions& options;
  fs::path out_dir;
  std::vector<std::string>& notes;
  std::vector<fs::path>& written;

  // Writes data to data/<name>.dat, runs plots/<name>.gp on it into figures/<name>.svg.
  // vars: more gnuplot assignments, e.g. "series='task2a task3'".
  void plot(Figure& fig, const std::string& data, const std::vector<std::string>& vars) {
    const fs::path script = options.plots_dir / (fig.name + ".gp");
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
    const ProcessResult r = run_process({options.gnuplot, "-e", assignments, script.string()},
                                        kGnuplotTimeoutSeconds);
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
};

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
  std::set<int> ranks;
  const Run* best = nullptr;
  for (const auto& [exercise, by_ranks] : runs) {
    series += (series.empty() ? "" : " ") + exercise;
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
      "ranks; every run's is in the timing table.",
      text(t, {"count"}, "?"), text(t, {"discarded"}, "?"),
      text(best->results, {"config", "global_train_batch_size"}, "?"),
      text(best->results, {"config", "max_seq_length"}, "?"), best->label(),
      fmt::format("{:.0f}", number(t, {"tokens_per_second"}).value_or(0)));
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

// ---- The documents

struct Report {
  std::string title;
  std::vector<std::pair<std::string, std::string>> provenance;
  std::string score;
  Table scores;
  std::vector<Figure> figures;
  std::vector<Table> tables;
  std::vector<std::string> notes;
};

std::string first_line(const std::string& s) {
  const size_t start = s.find_first_not_of(" \n\t");
  return start == std::string::npos ? "" : s.substr(start, s.find('\n', start) - start);
}

std::string markdown_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string("\\`*_[]<>|#").find(c) != std::string::npos) out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string figure_heading(const Figure& fig) { return fmt::format("Figure {}. {}", fig.number, fig.title); }

std::string markdown(const Report& report, const fs::path& out_dir) {
  std::string md = "# " + markdown_escape(report.title) + "\n\n";
  for (const auto& [key, value] : report.provenance) md += "- **" + key + ":** " + markdown_escape(value) + "\n";
  auto table = [&](const Table& t) {
    std::string s = "|";
    for (const std::string& h : t.header) s += " " + markdown_escape(h) + " |";
    s += "\n|";
    for (char a : t.align) s += a == 'r' ? " ---: |" : " --- |";
    s += "\n";
    for (const auto& row : t.rows) {
      s += "|";
      for (const std::string& cell : row) s += " " + markdown_escape(cell) + " |";
      s += "\n";
    }
    return s + "\n";
  };
  md += "\n## Score: " + report.score + "\n\n" + table(report.scores);
  if (!report.notes.empty()) {
    md += "## Notes\n\n";
    for (const std::string& n : report.notes) md += "- " + markdown_escape(n) + "\n";
    md += "\n";
  }
  md += "## Figures\n\n";
  for (const Figure& fig : report.figures) {
    if (!fig.missing.empty()) {
      md += fmt::format("**Figure {} ({}) left out:** {}.\n\n", fig.number, fig.title, markdown_escape(fig.missing));
      continue;
    }
    md += fmt::format("![{}]({})\n\n**{}** {}\n\n*Provenance:* {}\n\n", markdown_escape(figure_heading(fig)),
                      fs::relative(fig.svg, out_dir).generic_string(), markdown_escape(figure_heading(fig)),
                      markdown_escape(fig.caption), markdown_escape(fig.provenance));
  }
  md += "## Tables\n\n";
  for (const Table& t : report.tables) md += "**" + markdown_escape(t.title) + "**\n\n" + table(t);
  return md;
}

// The SVG gnuplot wrote, ready to paste into HTML: no XML prologue, and its ids prefixed so
// several figures on one page do not share ids (gnuplot gives every file the same ones).
std::string inline_svg(const fs::path& path, const std::string& prefix, const std::string& label) {
  std::string svg = io::read_file(path);
  const size_t start = svg.find("<svg");
  if (start == std::string::npos) throw Error(path.string() + ": gnuplot wrote no <svg> element");
  svg = svg.substr(start);
  svg.insert(4, " role=\"img\" aria-label=\"" + html_escape(label) + "\"");
  if (const size_t title = svg.find("<title>Gnuplot</title>"); title != std::string::npos)
    svg.replace(title, 22, "<title>" + html_escape(label) + "</title>");  // the tooltip
  for (const std::string from : {" id=\"", " id='", "url(#", "href=\"#", "href='#"}) {
    const std::string to = from + prefix + "-";
    for (size_t at = svg.find(from); at != std::string::npos; at = svg.find(from, at + to.size()))
      svg.replace(at, from.size(), to);
  }
  return svg;
}

constexpr const char* kCss = R"(
body { font: 15px/1.5 "Liberation Sans", "Helvetica Neue", Arial, sans-serif; color: #222;
       max-width: 1000px; margin: 2em auto; padding: 0 1em; }
h1 { font-size: 1.7em; margin-bottom: .3em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
dl.provenance { display: grid; grid-template-columns: max-content auto; gap: .1em 1em; color: #444; }
dl.provenance dt { font-weight: bold; } dl.provenance dd { margin: 0; }
table { border-collapse: collapse; margin: .5em 0 1.5em; font-size: .93em; }
th, td { padding: .25em .7em; border-bottom: 1px solid #e3e3e3; vertical-align: top; }
th { border-bottom: 2px solid #999; text-align: left; } .r { text-align: right; font-variant-numeric: tabular-nums; }
caption { caption-side: top; text-align: left; font-weight: bold; padding-bottom: .3em; }
.passed { color: #1b7f3b; } .failed { color: #b00020; font-weight: bold; }
figure { margin: 1.5em 0; } figure svg { width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: .93em; color: #333; margin-top: .4em; } .prov { color: #666; font-size: .9em; }
.missing { background: #fff4e5; border-left: 4px solid #e69f00; padding: .5em 1em; }
ul.notes li { color: #7a4b00; }
)";

std::string html(const Report& report) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" +
                  html_escape(report.title) + "</title>\n<style>" + kCss + "</style>\n</head>\n<body>\n<h1>" +
                  html_escape(report.title) + "</h1>\n<dl class=\"provenance\">\n";
  for (const auto& [key, value] : report.provenance)
    h += "<dt>" + html_escape(key) + "</dt><dd>" + html_escape(value) + "</dd>\n";
  h += "</dl>\n";
  auto table = [&](const Table& t, const std::string& caption) {
    std::string s = "<table>\n";
    if (!caption.empty()) s += "<caption>" + html_escape(caption) + "</caption>\n";
    s += "<thead><tr>";
    for (size_t c = 0; c < t.header.size(); ++c)
      s += std::string(t.align[c] == 'r' ? "<th class=\"r\">" : "<th>") + html_escape(t.header[c]) + "</th>";
    s += "</tr></thead>\n<tbody>\n";
    for (const auto& row : t.rows) {
      s += "<tr>";
      for (size_t c = 0; c < row.size(); ++c) {
        std::string cls = c < t.align.size() && t.align[c] == 'r' ? "r" : "";
        if (row[c] == "passed" || row[c] == "failed") cls = row[c];
        s += (cls.empty() ? "<td>" : "<td class=\"" + cls + "\">") + html_escape(row[c]) + "</td>";
      }
      s += "</tr>\n";
    }
    return s + "</tbody>\n</table>\n";
  };
  h += "<h2>Score: " + html_escape(report.score) + "</h2>\n" + table(report.scores, "");
  if (!report.notes.empty()) {
    h += "<h2>Notes</h2>\n<ul class=\"notes\">\n";
    for (const std::string& n : report.notes) h += "<li>" + html_escape(n) + "</li>\n";
    h += "</ul>\n";
  }
  h += "<h2>Figures</h2>\n";
  for (const Figure& fig : report.figures) {
    if (!fig.missing.empty()) {
      h += fmt::format("<p class=\"missing\"><b>Figure {} ({}) left out:</b> {}.</p>\n", fig.number,
                       html_escape(fig.title), html_escape(fig.missing));
      continue;
    }
    h += fmt::format("<figure id=\"figure-{}\">\n{}\n<figcaption><b>{}</b> {}<br><span class=\"prov\">Provenance: "
                     "{}</span></figcaption>\n</figure>\n",
                     fig.number, inline_svg(fig.svg, "fig" + std::to_string(fig.number), figure_heading(fig)),
                     html_escape(figure_heading(fig)), html_escape(fig.caption), html_escape(fig.provenance));
  }
  h += "<h2>Tables</h2>\n";
  for (const Table& t : report.tables) h += table(t, t.title);
  return h + "</body>\n</html>\n";
}

Table score_table(const Folder& f, std::string& score, std::vector<std::string>& notes) {
  Table t{"Scores", {"test", "score", "status", "output"}, "lrll", {}};
  const json* tests = find(f.top, {"tests"});
  if (!tests || !tests->is_array() || tests->empty())
    notes.push_back(fmt::format("{}: no tests, so no score table", (f.dir / "results.json").string()));
  for (const json& test : tests && tests->is_array() ? *tests : json::array())
    t.rows.push_back({text(test, {"name"}, "(unnamed)"),
                      fmt::format("{} / {}", text(test, {"score"}, "?"), text(test, {"max_score"}, "?")),
                      text(test, {"status"}, number(test, {"score"}) == number(test, {"max_score"}) ? "passed" : "failed"),
                      first_line(text(test, {"output"}))});
  score = fmt::format("{} / {}", text(f.top, {"score"}, "?"), text(f.top, {"max_score"}, "?"));
  return t;
}

}  // namespace

ReportSummary render_report(const ReportOptions& options) {
  ReportSummary summary;
  std::vector<std::string>& notes = summary.notes;
  const Folder folder = load_folder(options.results_dir, notes);
  const fs::path out_dir = options.out_dir.empty() ? options.results_dir / "report" : options.out_dir;
  const Provenance pv = provenance(folder, notes);

  Report report;
  report.title = "dtlab grading report" + (pv.submission.empty() ? "" : ": " + pv.submission);
  report.provenance = {{"Results", options.results_dir.string()},
                       {"Commit", pv.commit + (pv.dirty ? " (with uncommitted changes)" : "")},
                       {"LibTorch", pv.libtorch + ", backend " + pv.backend},
                       {"Machine", fmt::format("{}: {} cores, {}", pv.host, pv.cores, pv.cpu)},
                       {"Seed", pv.seed},
                       {"Graded", fmt::format("{} in {} s", pv.date, text(folder.top, {"execution_time"}, "?"))}};
  report.scores = score_table(folder, report.score, notes);

  Plotter plotter{options, out_dir, notes, summary.figures};
  Table timing, traffic, sweep;
  report.figures.push_back(timing_figure(folder, pv, plotter, timing));
  report.figures.push_back(loss_figure(folder, pv, plotter));
  report.figures.push_back(traffic_figure(folder, pv, plotter, traffic));
  report.figures.push_back(sweep_figure(folder, pv, plotter, sweep));
  for (Table* t : {&timing, &traffic, &sweep})
    if (!t->rows.empty()) {
      t->title = fmt::format("Table {}. {}", report.tables.size() + 1, t->title);
      report.tables.push_back(*t);
    }
  for (const Figure& fig : report.figures)
    if (!fig.missing.empty()) {
      notes.push_back(fmt::format("Figure {} ({}) left out: {}", fig.number, fig.title, fig.missing));
      // An earlier report's figure must not pass for this one's.
      fs::remove(out_dir / "figures" / (fig.name + ".svg"));
      fs::remove(out_dir / "data" / (fig.name + ".dat"));
    }
  report.notes = notes;

  summary.markdown = out_dir / "report.md";
  summary.html = out_dir / "report.html";
  io::write_file_atomically(summary.markdown, markdown(report, out_dir));
  io::write_file_atomically(summary.html, html(report));
  return summary;
}

}  // namespace dtlab::grader
