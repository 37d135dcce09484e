// The parts of `grader report` (report.h) shared by its two files: report.cpp reads the results
// folder and writes the documents, report_figures.cpp draws the figures. Internal to the grader.
#pragma once

#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "report.h"

namespace dtlab::grader::report_parts {

namespace fs = std::filesystem;
using nlohmann::json;

inline constexpr double kGnuplotTimeoutSeconds = 60;
inline const std::vector<std::string> kTimedExercises = {"task2a", "task2b", "task3"};
inline const std::set<std::string> kPurposes = {"timing", "losses", "reference", "bucket-sweep", "traffic",
                                                "dp-timing-weak", "dp-timing-strong", "dp-learning",
                                                "pipeline-timing", "pp-timing", "cluster", "cluster-dp",
                                                "cluster-pp", "zero-scaling", "cluster-zero", "cluster-tp",
                                                "cluster-mesh"};

// Reading JSON leniently: a missing field is reported by the caller, never a crash.
const json* find(const json& j, std::initializer_list<const char*> keys);
std::optional<double> number(const json& j, std::initializer_list<const char*> keys);
std::string text(const json& j, std::initializer_list<const char*> keys, const std::string& fallback = "");

inline std::string ranks_text(double n) { return fmt::format("{:g} rank{}", n, n == 1 ? "" : "s"); }
// The model a run trained: its preset's name (--model_config), else its folder.
inline std::string model_name(const json& results) {
  const std::string preset = text(results, {"config", "model_config"});
  return preset.empty() ? text(results, {"config", "model_name_or_path"}, "?") : preset;
}

struct Run {
  std::string id, exercise, purpose;
  int world = 1;
  fs::path results_path;
  json results;  // the run's results.json ("dtlab.results/1")
  json record;   // its run.json (the cluster demo's names the link rate)
  std::string label() const { return exercise + " (" + ranks_text(world) + ")"; }
};

struct Folder {
  fs::path dir;
  json top;               // results.json (Gradescope's format)
  std::vector<Run> runs;  // finished runs of the purposes the report uses, by id
  std::vector<Run> every_run;  // every finished run with a results.json (the memory and compute table)
};

// From results.json's extra_data, filled in from the runs where it is silent.
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

struct Figure {
  Figure(int n, std::string file_name, std::string heading) : number(n), name(file_name), title(heading) {}
  int number = 0;
  std::string name, title;  // name: the template plots/<name>.gp and the files <name>.svg/.dat
  std::string template_name;  // when set, the template plots/<template_name>.gp instead
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

struct Plotter {
  const ReportOptions& options;
  fs::path out_dir;
  std::vector<std::string>& notes;
  std::vector<fs::path>& written;

  // Writes data to data/<name>.dat, runs plots/<name>.gp on it into figures/<name>.svg.
  // vars: more gnuplot assignments, e.g. "series='task2a task3'".
  void plot(Figure& fig, const std::string& data, const std::vector<std::string>& vars);
};

// A string as a gnuplot string literal: single quotes, where only '' needs escaping.
std::string gp_string(std::string s);

// Milliseconds with one decimal, from seconds.
std::string ms(double seconds);

// The figures (report_figures.cpp; the dp exercise's in report_figures_dp.cpp, the pipeline's in
// report_figures_pipeline.cpp); the tables are
// filled alongside.
Figure timing_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table);
Figure loss_figure(const Folder& f, const Provenance& pv, Plotter& plotter);
Figure traffic_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table);
Figure sweep_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table);
Figure dp_scaling_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table);
Figure dp_epochs_figure(const Folder& f, const Provenance& pv, Plotter& plotter);
Figure pipeline_modes_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table);
Figure pipeline_timeline_figure(const Folder& f, const Provenance& pv, Plotter& plotter);
// The pp exercise's (report_figures_pp.cpp).
Figure pp_timeline_figure(const Folder& f, const Provenance& pv, Plotter& plotter);
Figure pp_schedules_figure(const Folder& f, const Provenance& pv, Plotter& plotter);
// The GPT-2 exercises on the emulated cluster (report_figures_cluster.cpp).
Figure cluster_lm_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table);
Figure cluster_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table);
Figure zero_memory_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table);
Figure cluster_zero_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table);
Figure cluster_tp_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table);
Figure cluster_mesh_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table);
// Each graded exercise's memory and compute (report_memory.cpp, table and figure): of its runs that measured them,
// the one of the most ranks; graded: the exercises the grading graded (nullopt: all).
Table memory_compute_table(const Folder& f, const std::optional<std::vector<std::string>>& graded);
// Figure 19: the same runs' memory, one bar a rank.
Figure exercise_memory_figure(const Folder& f, const Provenance& pv, Plotter& plotter,
                              const std::optional<std::vector<std::string>>& graded);

}  // namespace dtlab::grader::report_parts
