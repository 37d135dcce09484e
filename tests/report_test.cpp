// `grader report` on the stored results folder tests/data/grade-sample (made by
// tests/data/make_grade_sample.sh from the reference solutions): every figure drawn with its data
// and provenance, missing inputs said out loud, bad folders refused with the path named.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "dtlab/core/error.h"
#include "dtlab/io/file.h"
#include "dtlab/io/json_file.h"
#include "report.h"
#include "test_util.h"

// Everything in a namespace named after the file (no anonymous namespace): the unit suites share
// one binary, compiled in groups of files (Note [Unity builds] in cmake/Dtlab.cmake), so helpers
// must not collide, and a TEST_F class must not derive from a type of an anonymous namespace.
namespace report_test {

namespace fs = std::filesystem;
using dtlab::grader::render_report;
using dtlab::grader::ReportOptions;
using dtlab::grader::ReportSummary;
using nlohmann::json;

const fs::path kSample = fs::path(DTLAB_SOURCE_DIR) / "tests" / "data" / "grade-sample";
const fs::path kPlots = fs::path(DTLAB_SOURCE_DIR) / "plots";
const std::vector<std::string> kFigures = {"timing",      "losses",         "traffic",           "sweep",
                                           "dp_scaling",  "dp_epochs",      "pipeline_modes",    "pipeline_timeline",
                                           "cluster",     "pp_timeline",    "pp_schedules",      "cluster_lm",
                                           "exercise_memory"};

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

// The memory section a run of `world` ranks gains in each copy (known numbers, so that figure 19's
// data can be checked): rank r's tensors peak at 20 + r MB, of which parameters 4, gradients 4
// (none measured in the task 1 runs, as the kit's task 1 step does not end in apply_update) and
// AdamW's moments 8; its process held 300 MB after start-up and 350 + r in its steps.
json memory_section(int world, bool gradients_measured) {
  json m;
  for (int r = 0; r < world; ++r) {
    m["tensor_steps_peak_bytes"].push_back(20'000'000 + r * 1'000'000);
    m["parameter_bytes"].push_back(4'000'000);
    m["optimizer_state_bytes"].push_back(8'000'000);
    m["gradient_bytes"].push_back(gradients_measured ? 4'000'000 : -1);
    m["activations_and_rest_at_peak_bytes"].push_back(gradients_measured ? 4'000'000 + r * 1'000'000 : -1);
    m["rss_after_startup_bytes"].push_back(300'000'000);
    m["load_peak_rss_bytes"].push_back(320'000'000);
    m["steps_peak_rss_bytes"].push_back(350'000'000 + r * 1'000'000);
  }
  m["peak_reset"] = true;
  return m;
}

// A private copy of the stored folder, so a test can break it and the report lands in scratch.
// The stored grading predates the runs' memory sections (99201ab): each run gains the one above.
fs::path copy_sample(const std::string& name) {
  const fs::path dir = dtlab::test::fresh_temp_dir("report-" + name) / "results";
  fs::copy(kSample, dir, fs::copy_options::recursive);
  fs::remove_all(dir / "report");  // in case someone rendered into the stored folder
  for (const auto& run : fs::directory_iterator(dir / "runs")) {
    // Where the report reads it: beside run.json, else in the run's output folder.
    fs::path results = run.path() / "results.json";
    if (!fs::is_regular_file(results)) results = run.path() / "output" / "results.json";
    if (!fs::is_regular_file(results)) continue;
    const json record = dtlab::io::read_json_file(run.path() / "run.json");
    json r = dtlab::io::read_json_file(results);
    // The ranks as the report counts them: run.json's world_size, else the run's own.
    const int world = record.value("world_size", r["environment"].value("world_size", 1));
    r["memory"] = memory_section(world, record["exercise"] != "task1");
    dtlab::io::write_file_atomically(results, r.dump());
  }
  return dir;
}

ReportSummary render(const fs::path& results) {
  ReportOptions o;
  o.results_dir = results;
  o.plots_dir = kPlots;
  return render_report(o);
}

std::string joined(const std::vector<std::string>& notes) {
  std::string s;
  for (const std::string& n : notes) s += n + "\n";
  return s;
}

json run_results(const fs::path& results, const std::string& run) {
  return dtlab::io::read_json_file(results / "runs" / run / "output" / "results.json");
}

TEST(Report, RendersEveryFigureFromAStoredResultsFolder) {
  const fs::path results = copy_sample("all");
  const ReportSummary s = render(results);
  EXPECT_TRUE(s.notes.empty()) << joined(s.notes);
  EXPECT_EQ(s.markdown, results / "report" / "report.md");
  EXPECT_EQ(s.html, results / "report" / "report.html");
  ASSERT_EQ(s.figures.size(), kFigures.size());
  // What each figure must show: its series' names as gnuplot writes them into the SVG.
  const std::map<std::string, std::vector<std::string>> series = {
      {"timing", {"task2a: whole iteration", "task2b: communication", "task3: whole iteration"}},
      {"losses", {"reference (1 rank)", "task2a (4 ranks)", "task2b (4 ranks)", "task3 (4 ranks)"}},
      {"traffic", {"expected", "measured", "156 steps", "×1.00"}},
      {"sweep", {"6 buckets", "waiting for gradient buckets"}},
      {"dp_scaling", {"batch 8 per rank: real tokens", "global batch 16: with padding", "seconds per epoch"}},
      {"dp_epochs", {"validation loss", "BLEU", "dp (2 ranks)"}},
      {"pipeline_modes", {"model-par.", "m=8", "GPipe: (n-1)/(m+n-1)", "stage 1"}},
      {"pipeline_timeline", {"forward", "backward", "2 stages x 4 micro-batches"}},
      {"cluster", {"task 2a: gather/scatter", "2b: 2(n-1)/n S / rate", "on 4 emulated hosts"}},
      {"pp_timeline", {"GPipe: every forward, then every backward", "1F1B: warm-up", "2 stage ranks x 8 micro-batches"}},
      {"pp_schedules", {"Stored activations, stage 0", "GPipe", "1F1B", "(n-1)/(m+n-1)"}},
      {"cluster_lm", {"dp: batch per host fixed", "predicted (sent)", "measured (eth0 tx)"}},
      {"exercise_memory", {"parameters", "gradients", "optimiser state", "the rest at the peak", "peak in the steps",
                           "after start-up", "task2b 0", "task1 0"}}};
  const std::string md = dtlab::io::read_file(s.markdown);
  for (const std::string& name : kFigures) {
    const fs::path svg = results / "report" / "figures" / (name + ".svg");
    EXPECT_NE(std::find(s.figures.begin(), s.figures.end(), svg), s.figures.end()) << svg;
    ASSERT_TRUE(fs::is_regular_file(svg)) << svg;
    EXPECT_GT(fs::file_size(svg), 10'000u) << svg;
    EXPECT_FALSE(fs::exists(svg.string() + ".partial"));
    const std::string text = dtlab::io::read_file(svg);
    EXPECT_TRUE(contains(text, "<svg")) << svg;
    for (const std::string& label : series.at(name)) EXPECT_TRUE(contains(text, label)) << svg << ": " << label;
    EXPECT_TRUE(fs::is_regular_file(results / "report" / "data" / (name + ".dat"))) << name;
    EXPECT_TRUE(contains(md, "](figures/" + name + ".svg)")) << name;
  }
  for (int n = 1; n <= 12; ++n) EXPECT_TRUE(contains(md, fmt::format("**Figure {}. ", n))) << n;
  EXPECT_TRUE(contains(md, "**Figure 19. ")) << md;
  // Figure 19 and the memory table read each exercise's run of the most ranks, rank by rank; task 1's
  // unmeasured gradients are among the rest (20 - 4 - 8 MB), and say "-" in the table.
  const std::string memory = dtlab::io::read_file(results / "report" / "data" / "exercise_memory.dat");
  EXPECT_TRUE(contains(memory, "\"task1 0\" 4.0000 NaN 8.0000 8.0000 20.0000 300.0000 350.0000  # runs/task1-losses-w1"))
      << memory;
  EXPECT_TRUE(contains(memory, "\"3\" 4.0000 4.0000 8.0000 7.0000 23.0000 300.0000 353.0000  # runs/task4-traffic-w4 rank 3"))
      << memory;
  EXPECT_TRUE(contains(md, "| task1 | task1-losses-w1 | 1 | 20.00 | 4.00 | - | 8.00 | 333.8 |")) << md;

  // The HTML stands alone: the SVGs pasted in, no XML prologue, no links to the files.
  const std::string html = dtlab::io::read_file(s.html);
  EXPECT_EQ(count(html, "<svg"), kFigures.size());
  EXPECT_FALSE(contains(html, "<?xml"));
  EXPECT_FALSE(contains(html, "figures/"));
  EXPECT_TRUE(contains(html, "id=\"fig2-gnuplot_canvas\""));  // ids made unique per figure

  // Scores and tables carry the numbers of the runs, read independently here.
  const json top = dtlab::io::read_json_file(results / "results.json");
  for (const json& test : top["tests"]) {
    // The check's id: the rest of the name is escaped differently in each document.
    const std::string name = test["name"].get<std::string>(), id = name.substr(0, name.find(':'));
    EXPECT_TRUE(contains(md, id + ":")) << name;
    EXPECT_TRUE(contains(html, id + ":")) << name;
  }
  const json t = run_results(results, "task3-timing-w2")["timing"];
  const std::string row = fmt::format("| task3 | 2 | {:.1f} ± {:.1f} | {:.1f} | {:.0f} |", t["mean_seconds"].get<double>() * 1e3,
                                      t["stdev_seconds"].get<double>() * 1e3,
                                      t["mean_comm_seconds"].get<double>() * 1e3, t["tokens_per_second"].get<double>());
  EXPECT_TRUE(contains(md, row)) << row;
  const json traffic = run_results(results, "task4-traffic-w4")["traffic"][2];
  const std::string traffic_row = fmt::format(
      "| {} | {} | {:.1f} | {:.1f} | {:.4f} |", traffic["global_batch_size"].get<int>(), traffic["iterations"].get<int>(),
      traffic["expected_bytes_this_host"].get<double>() / 1e6, traffic["measured_tx_bytes"].get<double>() / 1e6,
      traffic["ratio_measured_to_expected"].get<double>());
  EXPECT_TRUE(contains(md, traffic_row)) << traffic_row;

  // The dp table: time per epoch is the mean step times the steps of a rank's part.
  const json weak = run_results(results, "dp-timing-weak-w2");
  const double mean = weak["timing"]["mean_seconds"].get<double>();
  const double steps = std::ceil(weak["config"]["pairs_per_rank"].get<double>() /
                                 weak["config"]["per_rank_train_batch_size"].get<double>());
  const std::string dp_row = fmt::format("| weak | 2 | 8 | {:.1f} | {:.1f} | {:.1f} | {:.0f} | {:.0f} |", mean * 1e3,
                                         weak["timing"]["mean_comm_seconds"].get<double>() * 1e3, mean * steps,
                                         weak["timing"]["tokens_per_second"].get<double>(),
                                         weak["timing"]["padded_tokens_per_second"].get<double>());
  EXPECT_TRUE(contains(md, dp_row)) << dp_row;
  // Figure 6's caption: each epoch's BLEU, read here from the learning run.
  // Named: a range-for over a member of run_results' temporary reads freed memory (AddressSanitizer).
  const json learns = run_results(results, "dp-learns-w2");
  for (const json& e : learns["epochs"]) {
    EXPECT_TRUE(contains(md, fmt::format("BLEU {:.1f}", e["eval_bleu"].get<double>()))) << e.dump();
  }

  // The pipeline table: the model-parallel run's step time, epoch time and bubble, read here.
  const json mp = run_results(results, "pipeline-timing-mp");
  const double mp_epoch = mp["timing"]["mean_seconds"].get<double>() *
                          std::ceil(mp["config"]["train_pairs"].get<double>() /
                                    mp["config"]["per_rank_train_batch_size"].get<double>());
  const std::string mp_row = fmt::format("| model parallel | 2 | 1 | {:.1f} | {:.1f} | {:.0f} | {:.2f} | 0.50 |",
                                         mp["timing"]["mean_seconds"].get<double>() * 1e3, mp_epoch,
                                         mp["timing"]["tokens_per_second"].get<double>(),
                                         mp["pipeline"]["mean_bubble_fraction"].get<double>());
  EXPECT_TRUE(contains(md, mp_row)) << mp_row;

  // The cluster table: gather/scatter's prediction from its own bytes, 2(n-1)S over 94% of 1 Gbit/s.
  const json star = run_results(results, "cluster-task2a-1gbit-w4");
  const double s_bytes = star["communication"]["by_operation"]["gather / gradients"]["bytes"].get<double>() /
                   static_cast<double>(star["iterations"].size());
  const std::string star_row =
      fmt::format("| task2a | 4 | 1gbit | {:.2f} | {:.2f} | {:.2f} | {:.1f} | {:.1f} |", star["timing"]["mean_seconds"].get<double>(),
                  star["timing"]["mean_comm_seconds"].get<double>(), 6 * s_bytes / (1e9 / 8 * 0.94), s_bytes / 1e6,
                  6 * s_bytes / 1e6);
  EXPECT_TRUE(contains(md, star_row)) << star_row;
  // ... and beside it what rank 0's interface counted: the star's 6 S and a little (headers, the loss).
  const double counted = star["timing"]["mean_tx_bytes"].get<double>() + star["timing"]["mean_rx_bytes"].get<double>();
  EXPECT_TRUE(contains(md, star_row + fmt::format(" {:.1f} |", counted / 1e6))) << counted;
  EXPECT_GT(counted, 6 * s_bytes);
  EXPECT_LT(counted, 6 * s_bytes * 1.05);
  // The caption names the rate where task 2b's waiting and computing are closest, and DDP's gain
  // there, from the runs.
  std::string closest;
  double best = 1e300;
  for (const auto& [rate, gbit] : std::vector<std::pair<std::string, double>>{{"1gbit", 1}, {"2500mbit", 2.5}, {"10gbit", 10}}) {
    const json ring = run_results(results, "cluster-task2b-" + rate + "-w4")["timing"];
    const json ddp = run_results(results, "cluster-task3-" + rate + "-w4")["timing"];
    const double wait = ring["mean_comm_seconds"].get<double>(), step = ring["mean_seconds"].get<double>();
    if (std::abs(std::log(wait / (step - wait))) < best) {
      best = std::abs(std::log(wait / (step - wait)));
      closest = fmt::format("closest at {:g} Gbit/s (task 2b waits {:.2f} s and computes {:.2f} s a step): there DDP's "
                            "step is {:.2f} times faster", gbit, wait, step - wait, step / ddp["mean_seconds"].get<double>());
    }
  }
  EXPECT_TRUE(contains(md, closest)) << closest;

  // Figure 2's caption: the largest |loss - reference| of task2b, computed here from the runs.
  const json ref = run_results(results, "reference-w1")["iterations"];
  const json dp = run_results(results, "task2b-losses-w4")["iterations"];
  double diff = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    diff = std::max(diff, std::abs(dp[i]["loss"].get<double>() - ref[i]["loss"].get<double>()));
  EXPECT_TRUE(contains(md, fmt::format("task2b (4 ranks) {:.2g} over {} steps", diff, ref.size()))) << diff;
  // Figure 1's caption names the tasks it times (Note [What a report shows]).
  EXPECT_TRUE(contains(md, "the order of task2a, task2b and task3 here is not the assignment's")) << md;
}

// The sample reduced to what `grader check task2b` leaves: task2b's tests and runs and the
// reference runs, plus a task3 test that was not submitted.
fs::path partial_sample(const std::string& name) {
  const fs::path results = copy_sample(name);
  json top = dtlab::io::read_json_file(results / "results.json");
  json tests = json::array();
  double score = 0, max_score = 0;
  for (const json& t : top["tests"]) {
    if (t["extra_data"]["check"].get<std::string>().rfind("task2b/", 0) != 0) continue;
    tests.push_back(t);
    score += t["score"].get<double>();
    max_score += t["max_score"].get<double>();
  }
  tests.push_back({{"name", "task3/timing: times the iterations"}, {"score", 0}, {"max_score", 2}, {"status", "failed"},
                   {"output", "[not submitted] the submission has no /s/task3/ folder"},
                   {"extra_data", {{"check", "task3/timing"}, {"outcome", "not submitted"}, {"seconds", 0}}}});
  top["tests"] = tests;
  top["score"] = score;
  top["max_score"] = max_score + 2;
  top["execution_time"] = 165.934566824;
  dtlab::io::write_json_file(results / "results.json", top);
  for (const auto& e : fs::directory_iterator(results / "runs")) {
    const std::string id = e.path().filename().string();
    if (id.rfind("task2b-", 0) != 0 && id.rfind("reference", 0) != 0) fs::remove_all(e.path());
  }
  return results;
}

// A report says only what was graded, whole: no gap notes for exercises not graded (nor for one
// not submitted), captions that name the graded tasks, every line of a check's output, the
// grading time in whole seconds.
TEST(Report, APartialGradingReportsOnlyWhatWasGraded) {
  const fs::path results = partial_sample("partial");
  const ReportSummary s = render(results);
  EXPECT_TRUE(s.notes.empty()) << joined(s.notes);
  const std::vector<fs::path> drawn = {results / "report" / "figures" / "timing.svg",
                                       results / "report" / "figures" / "losses.svg",
                                       results / "report" / "figures" / "exercise_memory.svg"};
  EXPECT_EQ(s.figures, drawn);
  const std::string md = dtlab::io::read_file(s.markdown), html = dtlab::io::read_file(s.html);
  for (const std::string& doc : {md, html}) {
    EXPECT_FALSE(contains(doc, "left out")) << doc;
    EXPECT_FALSE(contains(doc, "Figure 3")) << doc;
    EXPECT_FALSE(contains(doc, "three")) << doc;
    EXPECT_TRUE(contains(doc, "times task2b over rate-limited links")) << doc;
    EXPECT_TRUE(contains(doc, "2026-11-24T07:45:23Z in 166 s")) << doc;
    EXPECT_FALSE(contains(doc, "165.93")) << doc;
  }
  EXPECT_TRUE(contains(md, "- **Exercises:** task2b\n")) << md;
  EXPECT_TRUE(contains(html, "<dt>Exercises</dt><dd>task2b</dd>")) << html;
  // The timing check's numbers are on the lines after its first: each is in both tables.
  const json top = dtlab::io::read_json_file(results / "results.json");
  for (const json& t : top["tests"]) {
    if (t["extra_data"]["check"] != "task2b/timing") continue;
    std::istringstream lines(t["output"].get<std::string>());
    int n = 0;
    for (std::string line; std::getline(lines, line); ++n) {
      if (n == 0) continue;  // "[passed] ...": its brackets are escaped in Markdown
      EXPECT_TRUE(contains(md, line)) << line;
      EXPECT_TRUE(contains(html, line)) << line;
    }
    EXPECT_EQ(n, 4);
    EXPECT_TRUE(contains(md, "tokens/s<br>  2 ranks: ")) << md;
  }
}

// What was graded and could not be drawn is still said: task2b graded without its timing runs.
TEST(Report, AGradedExercisesMissingFigureIsStillSaid) {
  const fs::path results = partial_sample("partial-gap");
  for (int world : {1, 2, 4}) fs::remove_all(results / "runs" / fmt::format("task2b-timing-w{}", world));
  const ReportSummary s = render(results);
  const std::string notes = joined(s.notes);
  EXPECT_TRUE(std::regex_search(notes, std::regex("Figure 1 .* left out: no finished timing runs"))) << notes;
  EXPECT_EQ(count(notes, "left out"), 1u) << notes;
}

TEST(Report, EveryFigureCarriesItsProvenance) {
  const fs::path results = copy_sample("provenance");
  const ReportSummary s = render(results);
  const json p = dtlab::io::read_json_file(results / "results.json")["extra_data"]["provenance"];
  const std::vector<std::string> facts = {
      "dtlab " + p["commit"].get<std::string>(), "LibTorch " + p["libtorch"].get<std::string>(),
      p["backend"].get<std::string>(), "seed " + p["seed"].dump(),
      fmt::format("{}: {} cores, {}", p["hostname"].get<std::string>(), p["cores"].get<int>(), p["cpu"].get<std::string>())};
  const std::map<std::string, std::string> ranks = {
      {"timing", "1, 2, 4 ranks"}, {"losses", "1, 4 ranks"}, {"traffic", "· 4 ranks ·"}, {"sweep", "· 2 ranks ·"},
      {"dp_scaling", "1, 2, 4 ranks"}, {"dp_epochs", "· 2 ranks ·"}, {"pipeline_modes", "· 1 rank ·"},
      {"pipeline_timeline", "· 1 rank ·"}, {"cluster", "· 4 ranks ·"}, {"pp_timeline", "· 2 ranks ·"},
      {"pp_schedules", "· 2 ranks ·"}, {"cluster_lm", "1, 2, 4 ranks"}, {"exercise_memory", "1, 4 ranks"}};
  for (const std::string& name : kFigures) {
    const std::string svg = dtlab::io::read_file(results / "report" / "figures" / (name + ".svg"));
    for (const std::string& fact : facts) EXPECT_TRUE(contains(svg, fact)) << name << ": " << fact;
    EXPECT_TRUE(contains(svg, ranks.at(name))) << name;
  }
  // And in every caption of both documents.
  for (const fs::path& doc : {s.markdown, s.html}) {
    const std::string text = dtlab::io::read_file(doc);
    EXPECT_EQ(count(text, "Provenance:"), kFigures.size()) << doc;
    EXPECT_GE(count(text, facts.back()), kFigures.size()) << doc;
  }
}

TEST(Report, SaysWhichFigureIsMissingAndWhy) {
  const fs::path results = copy_sample("missing");
  for (const std::string run : {"task2a", "task2b", "task3"})
    for (int world : {1, 2, 4}) fs::remove_all(results / "runs" / fmt::format("{}-timing-w{}", run, world));
  fs::remove_all(results / "runs" / "task4-traffic-w4");
  const ReportSummary s = render(results);

  ASSERT_EQ(s.figures.size(), kFigures.size() - 2);
  EXPECT_FALSE(fs::exists(results / "report" / "figures" / "timing.svg"));
  EXPECT_FALSE(fs::exists(results / "report" / "figures" / "traffic.svg"));
  const std::string notes = joined(s.notes);
  EXPECT_TRUE(std::regex_search(notes, std::regex("Figure 1 .* left out: no finished timing runs")) ) << notes;
  EXPECT_TRUE(std::regex_search(notes, std::regex("Figure 3 .* left out: no finished traffic run")) ) << notes;
  EXPECT_TRUE(contains(notes, (results / "runs").string())) << notes;
  const std::string md = dtlab::io::read_file(s.markdown), html = dtlab::io::read_file(s.html);
  EXPECT_TRUE(contains(md, "**Figure 1 (Time per iteration vs number of ranks) left out:** no finished timing runs"));
  EXPECT_TRUE(contains(md, "**Figure 3 (Network traffic: expected vs measured) left out:**"));
  EXPECT_FALSE(contains(md, "figures/timing.svg"));
  EXPECT_TRUE(contains(md, "figures/losses.svg"));
  EXPECT_EQ(count(html, "<svg"), kFigures.size() - 2);
  EXPECT_TRUE(contains(html, "<b>Figure 1 (Time per iteration vs number of ranks) left out:</b>"));
}

// A grading made before the runs measured their memory (99201ab) has neither the table nor figure
// 19, and the report says the figure is left out and why, rather than drawing empty bars.
TEST(Report, AGradingWithoutMemorySectionsSaysFigure19IsLeftOut) {
  const fs::path results = copy_sample("no-memory");
  for (const auto& entry : fs::recursive_directory_iterator(results / "runs")) {
    if (entry.path().filename() != "results.json") continue;
    json r = dtlab::io::read_json_file(entry.path());
    r.erase("memory");
    dtlab::io::write_file_atomically(entry.path(), r.dump());
  }
  const ReportSummary s = render(results);
  const std::string notes = joined(s.notes);
  EXPECT_TRUE(std::regex_search(notes, std::regex("Figure 19 .* left out: no finished run .* measured its tensors")))
      << notes;
  EXPECT_FALSE(fs::exists(results / "report" / "figures" / "exercise_memory.svg"));
  EXPECT_EQ(s.figures.size(), kFigures.size() - 1);
  EXPECT_FALSE(contains(dtlab::io::read_file(s.markdown), "Memory and compute of each exercise"));
}

TEST(Report, LeavesOutARunThatDidNotFinishAndSaysSo) {
  const fs::path results = copy_sample("failed-run");
  const fs::path run = results / "runs" / "task3-bucket-cap25-w2";
  json record = dtlab::io::read_json_file(run / "run.json");
  record["outcome"] = "timeout";
  dtlab::io::write_json_file(run / "run.json", record);
  fs::remove(run / "output" / "results.json");
  // A finished run whose results.json went missing is said too.
  fs::remove(results / "runs" / "task3-bucket-cap0.1-w2" / "output" / "results.json");
  const ReportSummary s = render(results);

  const std::string notes = joined(s.notes);
  EXPECT_TRUE(contains(notes, "run task3-bucket-cap25-w2 (task3, bucket-sweep) did not finish (outcome \"timeout\")"))
      << notes;
  EXPECT_TRUE(contains(notes, (results / "runs" / "task3-bucket-cap0.1-w2" / "results.json").string())) << notes;
  EXPECT_EQ(s.figures.size(), kFigures.size());  // the sweep is drawn from the caps that remain
  const std::string md = dtlab::io::read_file(s.markdown);
  EXPECT_FALSE(contains(md, "| 25 | 2 | 2 |"));
  EXPECT_TRUE(contains(md, "| 5 | 2 | 2 |"));
  EXPECT_TRUE(contains(md, "did not finish"));  // the notes are in the report too
  const std::string data = dtlab::io::read_file(results / "report" / "data" / "sweep.dat");
  EXPECT_FALSE(contains(data, "cap25"));
  EXPECT_TRUE(contains(data, "cap5-w2"));
}

TEST(Report, FindsARunsResultsJsonBesideItsRunJson) {
  // `grader check` points a run's --output_dir at runs/<id>/output/; a run made by hand may
  // keep its results.json next to run.json.
  const fs::path results = copy_sample("flat-run-folder");
  const fs::path run = results / "runs" / "task4-traffic-w4";
  fs::rename(run / "output" / "results.json", run / "results.json");
  const ReportSummary s = render(results);
  EXPECT_TRUE(s.notes.empty()) << joined(s.notes);
  EXPECT_EQ(s.figures.size(), kFigures.size());
}

TEST(Report, NoResultsJsonIsAnErrorNamingThePath) {
  const fs::path empty = dtlab::test::fresh_temp_dir("report-empty");
  EXPECT_THROW_WITH(render(empty), dtlab::Error, (empty / "results.json").string());
  EXPECT_FALSE(fs::exists(empty / "report"));

  const fs::path garbage = dtlab::test::fresh_temp_dir("report-garbage");
  dtlab::io::write_file_atomically(garbage / "results.json", "{\"score\": 3,\n  oops\n");
  EXPECT_THROW_WITH(render(garbage), dtlab::Error, (garbage / "results.json").string() + ":2:");

  dtlab::io::write_file_atomically(garbage / "results.json", "[1, 2]\n");
  EXPECT_THROW_WITH(render(garbage), dtlab::Error, (garbage / "results.json").string());
}

TEST(Report, ABrokenTemplateIsAnErrorWithGnuplotsOutput) {
  const fs::path results = copy_sample("broken-template");
  const fs::path plots = results.parent_path() / "plots";
  fs::copy(kPlots, plots);
  std::ofstream(plots / "traffic.gp", std::ios::app) << "plot no_such_function(x)\n";
  ReportOptions o;
  o.results_dir = results;
  o.plots_dir = plots;
  EXPECT_THROW_WITH(render_report(o), dtlab::Error, "no_such_function");
  EXPECT_THROW_WITH(render_report(o), dtlab::Error, (plots / "traffic.gp").string());
  EXPECT_FALSE(fs::exists(results / "report" / "figures" / "traffic.svg.partial"));

  o.plots_dir = results;  // no templates there
  EXPECT_THROW_WITH(render_report(o), dtlab::Error, (results / "timing.gp").string());

  o.plots_dir = kPlots;  // no gnuplot: one line naming it and the package
  o.gnuplot = (results / "no-such-gnuplot").string();
  EXPECT_THROW_WITH(render_report(o), dtlab::Error, "cannot run " + o.gnuplot);
  EXPECT_THROW_WITH(render_report(o), dtlab::Error, "sudo apt install gnuplot-nox");
}

TEST(Report, EscapesTextAndHonoursOutDir) {
  const fs::path results = copy_sample("escape");
  json top = dtlab::io::read_json_file(results / "results.json");
  top["tests"][0]["name"] = "task2a: <script>alert(1)</script> & a | pipe";
  dtlab::io::write_json_file(results / "results.json", top);
  ReportOptions o;
  o.results_dir = results;
  o.out_dir = results.parent_path() / "elsewhere";
  o.plots_dir = kPlots;
  const ReportSummary s = render_report(o);
  EXPECT_EQ(s.html, o.out_dir / "report.html");
  EXPECT_FALSE(fs::exists(results / "report"));
  const std::string html = dtlab::io::read_file(s.html), md = dtlab::io::read_file(s.markdown);
  EXPECT_TRUE(contains(html, "task2a: &lt;script&gt;alert(1)&lt;/script&gt; &amp; a | pipe"));
  EXPECT_FALSE(contains(html, "<script>"));
  EXPECT_TRUE(contains(md, "\\<script\\>alert(1)\\</script\\> & a \\| pipe"));
}

}  // namespace report_test
