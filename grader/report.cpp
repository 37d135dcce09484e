// `grader report`, see report.h. Reads the results folder, has each figure drawn
// (report_figures.cpp), then writes one report model twice: Markdown and HTML.
#include "report.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dtlab/core/error.h"
#include "dtlab/io/file.h"
#include "dtlab/io/json_file.h"
#include "exercises.h"
#include "report_parts.h"

namespace dtlab::grader {
namespace report_parts {

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
std::string text(const json& j, std::initializer_list<const char*> keys, const std::string& fallback) {
  const json* v = find(j, keys);
  if (!v || v->is_null()) return fallback;
  return v->is_string() ? v->get<std::string>() : v->dump();
}

}  // namespace report_parts

namespace {

using namespace report_parts;

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
    run.record = r;
    // Other checks' runs are not plotted; they feed the table of memory and compute alone, and
    // say nothing when they did not finish (a wrong submission's runs often do not).
    const bool plotted = kPurposes.count(run.purpose) > 0;
    const std::string outcome = text(r, {"outcome"}, "missing");
    if (outcome != "ok") {
      const std::string message = text(r, {"message"});
      if (plotted) {
        notes.push_back(fmt::format("run {} ({}, {}) did not finish (outcome \"{}\"{}): left out", run.id,
                                    run.exercise, run.purpose, outcome,
                                    message.empty() ? "" : ": " + message.substr(0, message.find('\n'))));
      }
      continue;
    }
    // Rank 0's results.json, copied next to run.json or where the run's --output_dir put it.
    run.results_path = d / "results.json";
    if (!fs::is_regular_file(run.results_path) && fs::is_regular_file(d / "output" / "results.json"))
      run.results_path = d / "output" / "results.json";
    if (!fs::is_regular_file(run.results_path)) {
      if (plotted) {
        notes.push_back(fmt::format("run {} finished but {} is missing: left out", run.id,
                                    run.results_path.string()));
      }
      continue;
    }
    run.results = io::read_json_file(run.results_path);
    if (!run.results.is_object()) {
      if (!plotted) continue;
      throw Error(run.results_path.string() + ": expected a JSON object (schema dtlab.results/1)");
    }
    run.world = int(number(r, {"world_size"})
                        .value_or(number(run.results, {"environment", "world_size"}).value_or(1)));
    if (plotted) f.runs.push_back(run);
    f.every_run.push_back(std::move(run));
  }
  return f;
}

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

// s without the blank space around it.
std::string trim_space(const std::string& s) {
  const size_t start = s.find_first_not_of(" \n\t");
  return start == std::string::npos ? "" : s.substr(start, s.find_last_not_of(" \n\t") + 1 - start);
}

// A table cell: every line escaped, the lines kept apart (<br>, which Markdown tables and HTML
// both render), so a check's output of several lines (a timing check's numbers) reads whole.
std::string cell_lines(const std::string& s, std::string (*escape)(const std::string&)) {
  std::string out;
  for (size_t start = 0; start <= s.size();) {
    const size_t end = std::min(s.find('\n', start), s.size());
    out += (start ? "<br>" : "") + escape(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
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
      for (const std::string& cell : row) s += " " + cell_lines(cell, markdown_escape) + " |";
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
        s += (cls.empty() ? "<td>" : "<td class=\"" + cls + "\">") + cell_lines(row[c], html_escape) + "</td>";
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
                      trim_space(text(test, {"output"}))});
  score = fmt::format("{} / {}", text(f.top, {"score"}, "?"), text(f.top, {"max_score"}, "?"));
  return t;
}

// Note [What a report shows]: a report describes the grading in its folder, whole, and nothing
// else. A grading of some exercises (`make check-task2b`, `grader check task2b,dp`) has no runs of
// the others, and their figures are not gaps to report: a figure left out for want of runs gets a
// "left out" note only when one of its exercises was graded (results.json has a test of it that
// is not "not submitted"). The emulated cluster's figures are drawn only when `sudo make
// cluster-demo` left runs, and never noted. A results.json that lists no tests (written by hand)
// counts every exercise as graded.

// The exercises whose runs a figure draws, by the figure's name; {} for the cluster demo's.
std::vector<std::string> figure_exercises(const std::string& figure) {
  static const std::map<std::string, std::vector<std::string>> kExercises = {
      {"timing", kTimedExercises},   {"losses", {"task1", "task2a", "task2b", "task3"}},
      {"traffic", {"task4"}},        {"sweep", {"task3"}},
      {"dp_scaling", {"dp"}},        {"dp_epochs", {"dp"}},
      {"pipeline_modes", {"pipeline"}}, {"pipeline_timeline", {"pipeline"}},
      {"pp_timeline", {"pp"}},       {"pp_schedules", {"pp"}},
      {"zero_memory", {"zero"}},     {"cluster", {}},               {"cluster_lm", {}},
      {"cluster_zero", {}},          {"cluster_tp", {}},            {"cluster_mesh", {}}};
  if (figure == "exercise_memory") {  // every exercise's runs measure their memory
    std::vector<std::string> all;
    for (const Exercise& e : exercises()) all.push_back(e.name);
    return all;
  }
  const auto it = kExercises.find(figure);
  if (it == kExercises.end()) throw Error("report: figure " + figure + " names no exercises (report.cpp)");
  return it->second;
}

// The exercises the grading graded, in results.json's order; nullopt when it lists no tests.
std::optional<std::vector<std::string>> graded_exercises(const json& top) {
  const json* tests = find(top, {"tests"});
  if (!tests || !tests->is_array() || tests->empty()) return std::nullopt;
  std::vector<std::string> graded;
  for (const json& t : *tests) {
    if (text(t, {"extra_data", "outcome"}) == "not submitted") continue;
    const std::string check = text(t, {"extra_data", "check"}, text(t, {"name"}));
    const std::string exercise = check.substr(0, check.find_first_of("/:"));
    if (std::find(graded.begin(), graded.end(), exercise) == graded.end()) graded.push_back(exercise);
  }
  return graded;
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
                       {"Graded", fmt::format("{} in {} s", pv.date,
                                              number(folder.top, {"execution_time"})
                                                  ? fmt::format("{:.0f}", *number(folder.top, {"execution_time"}))
                                                  : text(folder.top, {"execution_time"}, "?"))}};
  const std::optional<std::vector<std::string>> graded = graded_exercises(folder.top);
  if (graded) {
    report.provenance.emplace_back("Exercises", graded->empty() ? "none submitted" : fmt::format("{}", fmt::join(*graded, ", ")));
  }
  report.scores = score_table(folder, report.score, notes);

  Plotter plotter{options, out_dir, notes, summary.figures};
  Table timing, traffic, sweep, dp_scaling, pipeline_modes, cluster, cluster_lm, zero_memory, cluster_zero, cluster_tp,
      cluster_mesh, memory_compute = memory_compute_table(folder, graded);
  const std::vector<Figure> figures = {
      timing_figure(folder, pv, plotter, timing), loss_figure(folder, pv, plotter),
      traffic_figure(folder, pv, plotter, traffic), sweep_figure(folder, pv, plotter, sweep),
      dp_scaling_figure(folder, pv, plotter, dp_scaling), dp_epochs_figure(folder, pv, plotter),
      pipeline_modes_figure(folder, pv, plotter, pipeline_modes), pipeline_timeline_figure(folder, pv, plotter),
      cluster_figure(folder, pv, plotter, cluster), pp_timeline_figure(folder, pv, plotter),
      pp_schedules_figure(folder, pv, plotter), cluster_lm_figure(folder, pv, plotter, cluster_lm),
      zero_memory_figure(folder, pv, plotter, zero_memory), cluster_zero_figure(folder, pv, plotter, cluster_zero),
      cluster_tp_figure(folder, pv, plotter, cluster_tp), cluster_mesh_figure(folder, pv, plotter, cluster_mesh),
      exercise_memory_figure(folder, pv, plotter, graded)};
  for (const Figure& fig : figures) {
    if (!fig.missing.empty()) {
      // An earlier report's figure must not pass for this one's.
      fs::remove(out_dir / "figures" / (fig.name + ".svg"));
      fs::remove(out_dir / "data" / (fig.name + ".dat"));
      const std::vector<std::string> exercises = figure_exercises(fig.name);
      const bool gap = std::any_of(exercises.begin(), exercises.end(), [&](const std::string& e) {
        return !graded || std::find(graded->begin(), graded->end(), e) != graded->end();
      });
      if (!gap) continue;  // Note [What a report shows]
      notes.push_back(fmt::format("Figure {} ({}) left out: {}", fig.number, fig.title, fig.missing));
    }
    report.figures.push_back(fig);
  }
  for (Table* t : {&timing, &traffic, &sweep, &dp_scaling, &pipeline_modes, &cluster, &cluster_lm, &zero_memory, &cluster_zero,
                    &cluster_tp, &cluster_mesh, &memory_compute})
    if (!t->rows.empty()) {
      t->title = fmt::format("Table {}. {}", report.tables.size() + 1, t->title);
      report.tables.push_back(*t);
    }
  report.notes = notes;

  summary.markdown = out_dir / "report.md";
  summary.html = out_dir / "report.html";
  io::write_file_atomically(summary.markdown, markdown(report, out_dir));
  io::write_file_atomically(summary.html, html(report));
  return summary;
}

}  // namespace dtlab::grader
