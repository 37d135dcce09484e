// `grader report`: figures (gnuplot) and a report document (Markdown and one self-contained HTML
// file) from the results folder `grader check` wrote. See plots/README.md for the figures.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace dtlab::grader {

struct ReportOptions {
  std::filesystem::path results_dir;  // the folder `grader check` wrote
  std::filesystem::path out_dir;      // default (empty): results_dir / "report"
  std::filesystem::path plots_dir;    // the gnuplot templates (the repo's plots/)
  std::string gnuplot = "gnuplot";    // program to run
};

struct ReportSummary {
  std::filesystem::path markdown, html;
  std::vector<std::filesystem::path> figures;  // files written (SVG)
  // Everything the report left out or worried about, e.g. "Figure 1 (...) left out: no timing
  // runs in DIR/runs". The same notes are in the documents; nothing is dropped silently.
  std::vector<std::string> notes;
};

// Reads results_dir/results.json and results_dir/runs/*/{run.json,results.json} (a run's
// results.json may also be in its output/ folder, where `grader check` points --output_dir), writes
// out_dir/{report.md,report.html}, out_dir/figures/*.svg and their data in out_dir/data/*.dat.
// Every file is written atomically. Throws dtlab::Error naming the file on bad input (no or
// malformed results.json, a run.json that is not JSON) and with gnuplot's output when it fails.
ReportSummary render_report(const ReportOptions& options);

}  // namespace dtlab::grader
