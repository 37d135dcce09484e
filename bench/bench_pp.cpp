// bench_pp: the pp exercise's step (pp-solution) as two local stage ranks, GPipe against 1F1B at
// 8 micro-batches, in alternating rounds: milliseconds per step, the bubble measured on the
// ranks' timelines, and the activations each stage rank held at once. The goals it prints (not
// a test: it never fails on speed): 1F1B's step within 10% of GPipe's, its peak of stored
// activations at most 2/8 of GPipe's (stage 0 holds n = 2 micro-batches instead of m = 8).
//
// The data and model: bench_dp_gpt2's (the translation fixture's pairs joined six at a time so
// that rows fill 128 tokens, the fixture tokenizer, random weights of gpt2-mini), batch 32. The
// two ranks share this machine's cores, each with its share.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "dtlab/tooling/build_paths.h"
#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/io/json_file.h"
#include "joined_pairs.h"
#include "launch.h"

namespace fs = std::filesystem;

namespace {

using namespace dtlab;

struct Options {
  std::string model = "gpt2-mini";
  int stages = 2, micro_batches = 8, batch = 32, rounds = 3, iterations = 8;
  int64_t seq = 128;
  std::string json;
  fs::path scratch;
};

struct Result {
  double seconds = 0, bubble = 0;
  std::vector<int> stored;
  std::vector<int64_t> bytes;
};

Result run_one(const Options& o, const fs::path& dir, const std::string& schedule, int round) {
  const fs::path out = dir / "runs" / fmt::format("{}-r{}", schedule, round);
  fs::remove_all(out);
  grader::LaunchSpec spec;
  spec.binary = DTLAB_PROGRAM("pp-solution");
  spec.world_size = o.stages;
  spec.log_dir = out;
  spec.timeout_seconds = 3600;
  spec.grace_seconds = 120;
  spec.args = {"--model_config", o.model, "--tokenizer_dir", (dir / "tokenizer").string(), "--data_dir",
               (dir / "data").string(), "--max_length", std::to_string(o.seq), "--batch_size", std::to_string(o.batch),
               "--stages", std::to_string(o.stages), "--micro_batches", std::to_string(o.micro_batches), "--schedule",
               schedule, "--max_steps", std::to_string(o.iterations), "--no_eval", "--log_first_steps", "0",
               "--no_save", "--seed", "42", "--output_dir", (out / "output").string(), "--overwrite_output_dir",
               "--master_ip", "{master}", "--master_port", "{port}", "--world_size", "{world}", "--local_rank",
               "{rank}", "--timeout", "600"};
  const grader::LaunchResult r = grader::launch_ranks(spec);
  if (!r.all_ok()) {
    throw Error(fmt::format("{} failed; rank 0's log {}:\n{}", schedule, (out / "rank0.log").string(),
                            grader::tail_lines(out / "rank0.log", 15)));
  }
  const nlohmann::json results = io::read_json_file(out / "output" / "results.json");
  Result res;
  res.seconds = results.at("timing").at("mean_seconds").get<double>();
  res.bubble = results.at("pp").at("timeline").at("bubble_fraction").get<double>();
  res.stored = results.at("pp").at("peak_stored_micro_batches").get<std::vector<int>>();
  res.bytes = results.at("pp").at("peak_activation_bytes").get<std::vector<int64_t>>();
  return res;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int run(const Options& o) {
  if (o.rounds < 1 || o.iterations < 2) throw Error("--rounds must be at least 1 and --iterations at least 2");
  const fs::path dir = o.scratch.empty() ? fs::temp_directory_path() / "dtlab-bench-pp" : o.scratch;
  bench::write_joined_pairs(dir);
  fmt::print("bench_pp: pp-solution, {} on {} stage ranks x {} micro-batches, batch {} x {} tokens, {} iterations per "
             "run (the first discarded), GPipe and 1F1B alternating, {} rounds; {} cores shared by the ranks\n",
             o.model, o.stages, o.micro_batches, o.batch, o.seq, o.iterations, o.rounds,
             std::thread::hardware_concurrency());
  fmt::print("{:<6} {:<6} {:>9} {:>7} {:>26} {:>22}\n", "round", "sched", "ms/step", "bubble",
             "stored micro-batches/rank", "peak bytes/rank");
  std::map<std::string, std::vector<double>> seconds;
  std::map<std::string, Result> last;
  nlohmann::json rows = nlohmann::json::array();
  for (int round = 1; round <= o.rounds; ++round) {
    for (const std::string schedule : {"gpipe", "1f1b"}) {
      const Result r = run_one(o, dir, schedule, round);
      seconds[schedule].push_back(r.seconds);
      last[schedule] = r;
      fmt::print("{:<6} {:<6} {:>9.1f} {:>7.2f} {:>26} {:>22}\n", round, schedule, 1e3 * r.seconds, r.bubble,
                 fmt::format("{}", fmt::join(r.stored, " ")), fmt::format("{}", fmt::join(r.bytes, " ")));
      std::fflush(stdout);
      rows.push_back({{"round", round}, {"schedule", schedule}, {"seconds_per_step", r.seconds},
                      {"bubble_fraction", r.bubble}, {"peak_stored_micro_batches", r.stored},
                      {"peak_activation_bytes", r.bytes}});
    }
  }
  const double time_ratio = median(seconds["1f1b"]) / median(seconds["gpipe"]);
  const double memory_ratio = static_cast<double>(last["1f1b"].bytes.at(0)) / static_cast<double>(last["gpipe"].bytes.at(0));
  fmt::print("1F1B / GPipe, median over rounds: step time {:.3f} (goal <= 1.10: {}); stage 0's peak activation bytes "
             "{:.3f} (goal <= {}/{} = {:.3f}: {})\n",
             time_ratio, time_ratio <= 1.10 ? "met" : "NOT met", memory_ratio, o.stages, o.micro_batches,
             static_cast<double>(o.stages) / o.micro_batches,
             memory_ratio <= static_cast<double>(o.stages) / o.micro_batches + 1e-9 ? "met" : "NOT met");
  if (!o.json.empty()) {
    io::write_json_file(o.json, {{"bench", "bench_pp"}, {"rows", rows}, {"time_ratio_1f1b_gpipe", time_ratio},
                                 {"stage0_memory_ratio_1f1b_gpipe", memory_ratio}});
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  return run_main("bench_pp", [&]() -> int {
    Options o;
    CLI::App app{"Times the pp exercise's step (pp-solution): GPipe against 1F1B on local stage ranks"};
    app.add_option("--model", o.model, "GPT-2 shape (preset)")->capture_default_str();
    app.add_option("--stages", o.stages, "Stage ranks")->capture_default_str();
    app.add_option("--micro_batches", o.micro_batches, "Micro-batches per step")->capture_default_str();
    app.add_option("--batch", o.batch, "Rows per step")->capture_default_str();
    app.add_option("--seq", o.seq, "Tokens per row (--max_length)")->capture_default_str();
    app.add_option("--rounds", o.rounds, "Alternating rounds of GPipe and 1F1B")->capture_default_str();
    app.add_option("--iterations", o.iterations, "Steps per run, the first discarded")->capture_default_str();
    app.add_option("--json", o.json, "Also write the table to this file");
    app.add_option("--scratch", o.scratch, "Folder for the data and the runs (default: the temp folder)");
    if (auto stop = parse_flags(app, argc, argv)) return *stop;
    return run(o);
  });
}
