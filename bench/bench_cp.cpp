// bench_cp: the cp exercise (cp-solution --probe scaling) against the sequence length. The
// attention: the bytes each rank held at its peak in the attention's forward and backward (the
// counting allocator) and its seconds, for the naive attention (T x T scores, while they fit
// 1 GiB), the block attention on one rank, and ring attention at CP 2 and CP 4 (balanced). The
// whole training step of a small GPT-2 (Note [The figure's whole step] in exercises/cp/probe.cpp):
// each rank's tensors at the step's peak, its peak resident set in the step and the step's
// seconds, at CP 1, 2 and 4 and for the naive GPT-2 at one rank. Then the causal imbalance: each
// rank's CPU seconds at CP 4, contiguous against balanced. Rounds alternate the configurations;
// the figures are the median over rounds. It prints tables and, with --json and --figure, writes
// them and draws plots/cp_scaling.gp. It never fails on speed.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/io/file.h"
#include "dtlab/io/json_file.h"
#include "dtlab/tooling/build_paths.h"
#include "dtlab/tooling/process.h"
#include "launch.h"

namespace fs = std::filesystem;

namespace {

using namespace dtlab;

struct Options {
  int rounds = 2;
  int64_t block = 128;
  std::string json, figure;
  fs::path scratch;
};

struct Config {
  std::string name, layout;
  int ranks;
};

// Every rank's rows ([rank][length index]) of one run.
std::vector<nlohmann::json> run_one(const Options& o, const fs::path& dir, const Config& c, int round) {
  const fs::path out = dir / fmt::format("{}-r{}", c.name, round);
  fs::remove_all(out);
  grader::LaunchSpec spec;
  spec.binary = DTLAB_PROGRAM("cp-solution");
  spec.world_size = c.ranks;
  spec.log_dir = out;
  spec.timeout_seconds = 3600;
  spec.grace_seconds = 120;
  // The probe reads no data; the language-model flags want a folder all the same.
  spec.args = {"--data_dir", dir.string(), "--probe", "scaling", "--cp_layout", c.layout, "--cp_block", std::to_string(o.block), "--output_dir",
               (out / "output").string(), "--master_ip", "{master}", "--master_port", "{port}", "--world_size",
               "{world}", "--local_rank", "{rank}", "--timeout", "600"};
  const grader::LaunchResult r = grader::launch_ranks(spec);
  if (!r.all_ok()) {
    throw Error(fmt::format("{} failed; rank 0's log {}:\n{}", c.name, (out / "rank0.log").string(),
                            grader::tail_lines(out / "rank0.log", 15)));
  }
  std::vector<nlohmann::json> ranks;
  for (int rank = 0; rank < c.ranks; ++rank) {
    ranks.push_back(io::read_json_file(out / "output" / fmt::format("rank{}.json", rank)).at("rows"));
  }
  return ranks;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int run(const Options& o) {
  if (o.rounds < 1) throw Error("--rounds must be at least 1");
  const fs::path dir = o.scratch.empty() ? fs::temp_directory_path() / "dtlab-bench-cp" : o.scratch;
  fs::create_directories(dir);
  const std::vector<Config> configs = {{"cp1", "balanced", 1}, {"cp2", "balanced", 2}, {"cp4", "balanced", 4},
                                       {"cp4-contiguous", "contiguous", 4}};
  fmt::print("bench_cp: cp-solution --probe scaling, attention of 1 x 4 heads x 32 per head, blocks of {} keys, causal; "
             "forward and backward; {} rounds alternating; {} cores shared by the ranks\n",
             o.block, o.rounds, std::thread::hardware_concurrency());
  // [config][round] -> ranks' rows
  std::map<std::string, std::vector<std::vector<nlohmann::json>>> runs;
  for (int round = 1; round <= o.rounds; ++round) {
    for (const Config& c : configs) runs[c.name].push_back(run_one(o, dir, c, round));
  }
  // Per length: a configuration's largest peak over its ranks (MiB) and the median over rounds of
  // its slowest rank's seconds.
  auto figure = [&](const std::string& config, const std::string& kind, size_t at, double* mib, double* ms) {
    std::vector<double> seconds;
    *mib = -1;
    for (const auto& ranks : runs[config]) {
      double slowest = 0, peak = 0;
      for (const auto& rows : ranks) {
        const nlohmann::json& row = rows.at(at);
        if (!row.contains(kind)) return false;
        slowest = std::max(slowest, row.at(kind).at("seconds").get<double>());
        peak = std::max(peak, row.at(kind).at("peak_bytes").get<double>());
      }
      seconds.push_back(slowest);
      *mib = peak / (1 << 20);
    }
    *ms = 1e3 * median(seconds);
    return true;
  };
  const nlohmann::json& lengths_rows = runs["cp1"].front().front();
  fmt::print("\nmemory per rank (MiB at the attention's peak) and time (ms, slowest rank) against the sequence length\n");
  fmt::print("{:>7} {:>18} {:>18} {:>18} {:>18}\n", "T", "naive (1 rank)", "blocks (1 rank)", "ring, CP 2", "ring, CP 4");
  std::string data = "# length naive_mib naive_ms blocks_mib blocks_ms cp2_mib cp2_ms cp4_mib cp4_ms\n";
  nlohmann::json table = nlohmann::json::array();
  for (size_t at = 0; at < lengths_rows.size(); ++at) {
    const int64_t length = lengths_rows.at(at).at("length");
    std::string line = fmt::format("{:>7}", length);
    std::string row = std::to_string(length);
    nlohmann::json j = {{"length", length}};
    for (const auto& [config, kind, key] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"cp1", "naive", "naive"}, {"cp1", "blocks", "blocks"}, {"cp2", "ring", "cp2"}, {"cp4", "ring", "cp4"}}) {
      double mib = 0, ms = 0;
      if (figure(config, kind, at, &mib, &ms)) {
        line += fmt::format(" {:>8.1f} {:>9.1f}", mib, ms);
        row += fmt::format(" {:.3f} {:.3f}", mib, ms);
        j[key] = {{"peak_mib", mib}, {"ms", ms}};
      } else {
        line += fmt::format(" {:>18}", "over budget");
        row += " NaN NaN";
      }
    }
    fmt::print("{}\n", line);
    data += row + "\n";
    table.push_back(j);
  }
  // The whole step per length: a configuration's largest tensors and resident set over its ranks
  // (MiB; the median over rounds) and the median of its slowest rank's seconds.
  auto step_figure = [&](const std::string& config, const std::string& kind, size_t at, double* tensor_mib,
                         double* rss_mib, double* ms) {
    std::vector<double> seconds, tensors, resident;
    for (const auto& ranks : runs[config]) {
      double slowest = 0, tensor = 0, rss = 0;
      for (const auto& rows : ranks) {
        const nlohmann::json& row = rows.at(at);
        if (!row.contains(kind)) return false;
        slowest = std::max(slowest, row.at(kind).at("seconds").get<double>());
        tensor = std::max(tensor, row.at(kind).at("peak_tensor_bytes").get<double>());
        rss = std::max(rss, row.at(kind).at("peak_rss_bytes").get<double>());
      }
      seconds.push_back(slowest);
      tensors.push_back(tensor / (1 << 20));
      resident.push_back(rss / (1 << 20));
    }
    *ms = 1e3 * median(seconds);
    *tensor_mib = median(tensors);
    *rss_mib = median(resident);
    return true;
  };
  fmt::print("\nthe whole training step of GPT-2 (2 blocks of width 128, 4 heads, vocabulary 256), one row of T tokens: "
             "per rank, MiB of tensors at the step's peak / MiB resident (the process's peak in the step), and ms "
             "(slowest rank)\n");
  fmt::print("{:>7} {:>24} {:>24} {:>24} {:>24}\n", "T", "naive GPT-2 (1 rank)", "CP 1 (blocks)", "CP 2", "CP 4");
  std::string steps_data =
      "# length naive_tensor_mib naive_rss_mib naive_ms cp1_tensor_mib cp1_rss_mib cp1_ms cp2_tensor_mib cp2_rss_mib "
      "cp2_ms cp4_tensor_mib cp4_rss_mib cp4_ms\n";
  nlohmann::json step_table = nlohmann::json::array();
  for (size_t at = 0; at < lengths_rows.size(); ++at) {
    const int64_t length = lengths_rows.at(at).at("length");
    std::string line = fmt::format("{:>7}", length);
    std::string row = std::to_string(length);
    nlohmann::json j = {{"length", length}};
    for (const auto& [config, kind, key] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"cp1", "naive_step", "naive"}, {"cp1", "step", "cp1"}, {"cp2", "step", "cp2"}, {"cp4", "step", "cp4"}}) {
      double tensor = 0, rss = 0, ms = 0;
      if (step_figure(config, kind, at, &tensor, &rss, &ms)) {
        line += fmt::format(" {:>7.1f} /{:>6.0f} {:>8.0f}", tensor, rss, ms);
        row += fmt::format(" {:.3f} {:.3f} {:.3f}", tensor, rss, ms);
        j[key] = {{"peak_tensor_mib", tensor}, {"peak_rss_mib", rss}, {"ms", ms}};
      } else {
        line += fmt::format(" {:>24}", "over budget");
        row += " NaN NaN NaN";
      }
    }
    fmt::print("{}\n", line);
    steps_data += row + "\n";
    step_table.push_back(j);
  }
  // The causal imbalance at the longest length: each rank's CPU seconds, median over rounds.
  const size_t last = lengths_rows.size() - 1;
  fmt::print("\ncausal imbalance at T = {}, CP 4: each rank's CPU seconds of its ring forward and backward\n",
             lengths_rows.at(last).at("length").get<int64_t>());
  std::string imbalance = "# rank balanced_s contiguous_s\n";
  nlohmann::json per_rank = nlohmann::json::array();
  for (int rank = 0; rank < 4; ++rank) {
    double s[2];
    int i = 0;
    for (const std::string config : {"cp4", "cp4-contiguous"}) {
      std::vector<double> v;
      for (const auto& ranks : runs[config]) v.push_back(ranks.at(rank).at(last).at("ring").at("cpu_seconds"));
      s[i++] = median(v);
    }
    fmt::print("  rank {}: balanced {:.3f} s, contiguous {:.3f} s\n", rank, s[0], s[1]);
    imbalance += fmt::format("{} {:.4f} {:.4f}\n", rank, s[0], s[1]);
    per_rank.push_back({{"rank", rank}, {"balanced_cpu_seconds", s[0]}, {"contiguous_cpu_seconds", s[1]}});
  }
  if (!o.json.empty()) {
    io::write_json_file(o.json, {{"bench", "bench_cp"}, {"block", o.block}, {"rounds", o.rounds},
                                 {"scaling", table}, {"step", step_table},
                                 {"imbalance", per_rank}});
  }
  if (!o.figure.empty()) {
    const fs::path datafile = fs::path(o.figure).replace_extension(".dat");
    io::write_file_atomically(datafile, data + "\n\n" + imbalance + "\n\n" + steps_data);
    const ProcessResult r =
        run_process({"gnuplot", "-e",
                     fmt::format("datafile='{}'; outfile='{}'; provenance='bench_cp, blocks of {}, {} rounds'",
                                 datafile.string(), o.figure, o.block, o.rounds),
                     (fs::path(DTLAB_SOURCE_DIR) / "plots" / "cp_scaling.gp").string()},
                    120);
    if (r.exit_code != 0) throw Error("gnuplot failed on plots/cp_scaling.gp:\n" + r.output);
    fmt::print("figure: {}\n", o.figure);
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  return run_main("bench_cp", [&]() -> int {
    Options o;
    CLI::App app{"The cp exercise against the sequence length: the attention's and the whole training step's memory "
                 "per rank and time, naive, blocks, ring at CP 2 and 4; the causal imbalance of a contiguous split"};
    app.add_option("--rounds", o.rounds, "Alternating rounds of every configuration")->capture_default_str();
    app.add_option("--block", o.block, "Keys per block")->capture_default_str();
    app.add_option("--json", o.json, "Also write the tables to this file");
    app.add_option("--figure", o.figure, "Also draw plots/cp_scaling.gp to this SVG (and its .dat beside it)");
    app.add_option("--scratch", o.scratch, "Folder for the runs (default: the temp folder)");
    if (auto stop = parse_flags(app, argc, argv)) return *stop;
    return run(o);
  });
}
