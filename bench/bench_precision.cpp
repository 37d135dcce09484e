// bench_precision: the precision exercise (precision-solution) in two parts. Memory for compute:
// a small GPT-2 (the gpt2-mini preset's width, 4 heads of 32, with --n_layer 2, 4 and 8 blocks) at
// one rank in fp32, with no block checkpointed, every block and every second block
// (--recompute_every 0, 1, 2): the bytes the forward kept for backward (the counting allocator's
// growth over the forward, results.json's memory_precision.forward_kept_bytes), the tensors at the
// step's peak (the model, its gradients and AdamW's state included) and the step's seconds
// (timing.mean_seconds, the first step discarded, and its fastest step, timing.min_seconds: the
// figure least moved by other work on a shared machine); rounds alternate the nine
// configurations, the figures are the median over rounds. The rank runs one intra-op thread
// (--threads): OpenMP's threads on cores other work shares wait for each other, and a step's time
// then says more about the neighbours than about the recompute.
// Then the bytes of every number: the losses of 2 ranks over the same steps in fp32, bf16 (a bf16
// compute copy of fp32 masters), fp16 gradients on the wire with the dynamic loss scaler, and fp16
// gradients unscaled (--loss_scale none), each from results.json's "iterations"; for both fp16
// runs the share of rank 0's nonzero gradients that fp16 flushed to zero at the scale used, and at
// scale 1 (memory_precision.fp16_steps). The losses do not depend on the machine's load: one run
// each. A loss run that fails (the kit ends a run whose loss went NaN with an error, and writes no
// results.json) is reported with its log's last line and left out of the figure.
// It prints tables and, with --json and --figure, writes them and draws plots/precision.gp
// (figure 18). It never fails on speed.
//
// The data and the tokenizer: bench_dp_gpt2's (joined_pairs.h: the translation fixture's pairs
// joined six at a time so that rows fill 128 tokens, the fixture tokenizer), random weights.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/io/file.h"
#include "dtlab/io/json_file.h"
#include "dtlab/tooling/build_paths.h"
#include "dtlab/tooling/process.h"
#include "joined_pairs.h"
#include "launch.h"

namespace fs = std::filesystem;

namespace {

using namespace dtlab;

struct Options {
  std::string model = "gpt2-mini";
  std::vector<int> layers = {2, 4, 8};
  int rounds = 2;
  int batch = 8;         // rows per step of the memory runs (one rank)
  int64_t seq = 128;     // tokens per row (--max_length)
  int iterations = 5;    // steps of a memory run, the first discarded
  int threads = 1;       // intra-op threads of a memory run's rank
  int loss_steps = 60;   // steps of a loss run
  int loss_world = 2;
  // The global batch of a loss run. At 16 (2 micro-batches of 4 a rank) the dynamic scaler's run
  // from 65536 went NaN at step 6 with no rank's own fp16 gradients overflowing (docs/MEASUREMENTS.md,
  // figure 18): most likely the fp16 sum over the ranks, which found_overflow does not look at.
  int loss_batch = 8;
  int micro_batches = 2; // of each rank's batch, in the loss runs
  double learning_rate = 1e-3;
  double loss_scale_init = 65536;  // the exercise's defaults (--loss_scale_init, --scale_growth_interval)
  int64_t growth_interval = 100;
  std::string json, figure;
  fs::path scratch;
};

// One run's results.json (rank 0's, with every rank's figures in memory_precision).
nlohmann::json run_one(const Options& o, const fs::path& dir, const std::string& name, int world,
                       const std::vector<std::string>& more) {
  const fs::path out = dir / "runs" / name;
  fs::remove_all(out);
  grader::LaunchSpec spec;
  spec.binary = DTLAB_PROGRAM("precision-solution");
  spec.world_size = world;
  spec.log_dir = out;
  spec.timeout_seconds = 3600;
  spec.grace_seconds = 120;
  spec.args = {"--model_config", o.model, "--tokenizer_dir", (dir / "tokenizer").string(), "--data_dir",
               (dir / "data").string(), "--max_length", std::to_string(o.seq), "--no_eval", "--log_first_steps", "0",
               "--no_save", "--seed", "42", "--learning_rate", fmt::format("{:g}", o.learning_rate), "--output_dir",
               (out / "output").string(), "--overwrite_output_dir", "--master_ip", "{master}", "--master_port",
               "{port}", "--world_size", "{world}", "--local_rank", "{rank}", "--timeout", "600"};
  spec.args.insert(spec.args.end(), more.begin(), more.end());
  const grader::LaunchResult r = grader::launch_ranks(spec);
  if (!r.all_ok()) {
    throw Error(fmt::format("{} failed; rank 0's log {}:\n{}", name, (out / "rank0.log").string(),
                            grader::tail_lines(out / "rank0.log", 15)));
  }
  return io::read_json_file(out / "output" / "results.json");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

constexpr double kMiB = 1 << 20;

struct Policy {
  std::string key, title;
  int every;
};

// A memory run's figures, rank 0's.
struct Memory {
  double kept = 0, peak = 0, seconds = 0, fastest = 0, forwards = 0;
};

Memory memory_of(const nlohmann::json& results) {
  const nlohmann::json& m = results.at("memory_precision");
  Memory r;
  r.kept = m.at("forward_kept_bytes").at(0).get<double>();
  r.peak = m.at("step_peak_tensor_bytes").at(0).get<double>();
  r.seconds = results.at("timing").at("mean_seconds").get<double>();
  r.fastest = results.at("timing").at("min_seconds").get<double>();
  // The blocks' forwards a micro-batch: n_layer without checkpointing, one more per checkpointed block.
  for (const nlohmann::json& f : m.at("block_forwards_per_micro_batch").at(0)) r.forwards += f.get<double>();
  return r;
}

struct LossRun {
  std::string key, title;
  std::vector<std::string> flags;
};

int run(const Options& o) {
  if (o.rounds < 1 || o.iterations < 3 || o.loss_steps < 1 || o.layers.empty()) {
    throw Error("--rounds and --loss_steps must be at least 1, --iterations at least 3 (the kit measures from step 2, "
                "the timing discards step 1), and --layers not empty");
  }
  const fs::path dir = o.scratch.empty() ? fs::temp_directory_path() / "dtlab-bench-precision" : o.scratch;
  bench::write_joined_pairs(dir);
  const std::vector<Policy> policies = {{"none", "no checkpointing", 0}, {"every1", "every block", 1},
                                        {"every2", "every 2nd block", 2}};
  fmt::print("bench_precision: precision-solution, {} with {} blocks, fp32 at 1 rank of {} thread{}, batch {} x {} "
             "tokens, dropout 0.1, {} steps a run (the first discarded), {} rounds alternating; {} cores\n",
             o.model, fmt::format("{}", fmt::join(o.layers, ", ")), o.threads, o.threads == 1 ? "" : "s", o.batch,
             o.seq, o.iterations, o.rounds, std::thread::hardware_concurrency());
  // [policy][layers] -> one Memory per round
  std::map<std::string, std::map<int, std::vector<Memory>>> runs;
  for (int round = 1; round <= o.rounds; ++round) {
    for (const int layers : o.layers) {
      for (const Policy& p : policies) {
        const nlohmann::json results =
            run_one(o, dir, fmt::format("L{}-{}-r{}", layers, p.key, round), 1,
                    {"--n_layer", std::to_string(layers), "--recompute_every", std::to_string(p.every), "--precision",
                     "fp32", "--batch_size", std::to_string(o.batch), "--max_steps", std::to_string(o.iterations),
                     "--threads", std::to_string(o.threads)});
        runs[p.key][layers].push_back(memory_of(results));
      }
    }
  }
  // Per configuration: the bytes (the same in every round: the median all the same) and the
  // median step.
  auto figure = [&](const std::string& policy, int layers) {
    std::vector<double> kept, peak, seconds, fastest;
    for (const Memory& m : runs[policy][layers]) {
      kept.push_back(m.kept);
      peak.push_back(m.peak);
      seconds.push_back(m.seconds);
      fastest.push_back(m.fastest);
    }
    return Memory{median(kept), median(peak), median(seconds), median(fastest), runs[policy][layers].front().forwards};
  };
  fmt::print("\nper step, rank 0: MiB the forward kept for backward / MiB of tensors at the step's peak, ms a step "
             "(the mean; in brackets the fastest step; medians of {} rounds), blocks' forwards a step\n",
             o.rounds);
  fmt::print("{:>6} {:>36} {:>36} {:>36}\n", "layers", "no checkpointing", "every block", "every 2nd block");
  std::string data = "# n_layer, then kept_mib peak_mib ms forwards fastest_ms for none, every1, every2\n";
  nlohmann::json table = nlohmann::json::array();
  for (const int layers : o.layers) {
    std::string line = fmt::format("{:>6}", layers);
    std::string row = std::to_string(layers);
    nlohmann::json j = {{"n_layer", layers}};
    for (const Policy& p : policies) {
      const Memory m = figure(p.key, layers);
      line += fmt::format(" {:>6.1f} /{:>6.1f} {:>6.0f} ({:>5.0f}) ms {:>3.0f}", m.kept / kMiB, m.peak / kMiB,
                          1e3 * m.seconds, 1e3 * m.fastest, m.forwards);
      row += fmt::format(" {:.4f} {:.4f} {:.3f} {:.0f} {:.3f}", m.kept / kMiB, m.peak / kMiB, 1e3 * m.seconds,
                         m.forwards, 1e3 * m.fastest);
      j[p.key] = {{"recompute_every", p.every}, {"forward_kept_bytes", m.kept}, {"step_peak_tensor_bytes", m.peak},
                  {"ms", 1e3 * m.seconds}, {"fastest_ms", 1e3 * m.fastest}, {"block_forwards", m.forwards}};
    }
    fmt::print("{}\n", line);
    data += row + "\n";
    table.push_back(j);
  }
  // Against no checkpointing, at the deepest model: the bytes saved and the time paid.
  const int deepest = o.layers.back();
  const Memory none = figure("none", deepest);
  for (const Policy& p : {policies[1], policies[2]}) {
    const Memory m = figure(p.key, deepest);
    fmt::print("{} blocks, {}: {:.2f} of the kept bytes, {:.2f} of the step peak, {:.2f} times the step's time "
               "({:.2f} times the fastest step's)\n",
               deepest, p.title, m.kept / none.kept, m.peak / none.peak, m.seconds / none.seconds,
               m.fastest / none.fastest);
  }
  std::fflush(stdout);

  // The losses: one run of each, 2 ranks.
  const std::vector<LossRun> loss_runs = {
      {"fp32", "fp32", {"--precision", "fp32"}},
      {"bf16", "bf16 compute, fp32 masters", {"--precision", "bf16"}},
      {"fp16", "fp16 gradients, dynamic scaler",
       {"--precision", "fp16", "--loss_scale", "dynamic", "--loss_scale_init", fmt::format("{:g}", o.loss_scale_init),
        "--scale_growth_interval", std::to_string(o.growth_interval)}},
      {"fp16_none", "fp16 gradients, unscaled", {"--precision", "fp16", "--loss_scale", "none"}}};
  fmt::print("\nbench_precision: losses of {} at {} ranks, a global batch of {} x {} tokens in {} micro-batches a "
             "rank, {} steps, lr {:g}, dropout 0.1, no checkpointing; the scaler from {:g}, x2 after {} good steps\n",
             o.model, o.loss_world, o.loss_batch, o.seq, o.micro_batches, o.loss_steps, o.learning_rate,
             o.loss_scale_init, o.growth_interval);
  // A run that fails (a loss gone NaN ends the kit's run with an error and no results.json) is a
  // figure too: its row says why, its curve is left out, the others go on.
  std::map<std::string, nlohmann::json> loss_results;
  std::map<std::string, std::vector<double>> losses;
  std::map<std::string, std::string> failed;
  for (const LossRun& l : loss_runs) {
    std::vector<std::string> flags = l.flags;
    flags.insert(flags.end(), {"--recompute_every", "0", "--global_batch_size", std::to_string(o.loss_batch),
                               "--micro_batches", std::to_string(o.micro_batches), "--max_steps",
                               std::to_string(o.loss_steps)});
    try {
      loss_results[l.key] = run_one(o, dir, "losses-" + l.key, o.loss_world, flags);
    } catch (const Error&) {
      std::string why = grader::tail_lines(dir / "runs" / ("losses-" + l.key) / "rank0.log", 1);
      while (!why.empty() && std::isspace(static_cast<unsigned char>(why.back()))) why.pop_back();
      failed[l.key] = why;
      continue;
    }
    for (const nlohmann::json& it : loss_results[l.key].at("iterations")) {
      losses[l.key].push_back(it.at("loss").get<double>());
    }
  }
  const std::vector<double>& reference = losses["fp32"];
  fmt::print("{:<32} {:>10} {:>10} {:>16} {:>10}\n", "run", "step 1", "last step", "max |- fp32|", "ms/step");
  nlohmann::json loss_table = nlohmann::json::array();
  for (const LossRun& l : loss_runs) {
    if (failed.count(l.key)) {
      fmt::print("{:<32} failed: {}\n", l.title, failed[l.key]);
      loss_table.push_back({{"run", l.key}, {"title", l.title}, {"failed", failed[l.key]}});
      continue;
    }
    const std::vector<double>& v = losses[l.key];
    double worst = 0;
    for (size_t s = 0; s < v.size() && s < reference.size(); ++s) {
      worst = std::max(worst, std::abs(v[s] - reference[s]));
    }
    const double ms = 1e3 * loss_results[l.key].at("timing").at("mean_seconds").get<double>();
    fmt::print("{:<32} {:>10.4f} {:>10.4f} {:>16.2e} {:>10.0f}\n", l.title, v.front(), v.back(), worst, ms);
    loss_table.push_back({{"run", l.key}, {"title", l.title}, {"losses", v}, {"max_abs_difference_from_fp32", worst},
                          {"ms", ms}});
  }
  std::string losses_data = "# step fp32 bf16 fp16 fp16_none\n";
  for (int s = 0; s < o.loss_steps; ++s) {
    losses_data += std::to_string(s + 1);
    for (const LossRun& l : loss_runs) {
      const std::vector<double>& v = losses[l.key];
      losses_data += static_cast<size_t>(s) < v.size() ? fmt::format(" {:.6f}", v[s]) : std::string(" NaN");
    }
    losses_data += "\n";
  }
  // fp16: rank 0's nonzero gradients flushed to zero in fp16 at the scale used and at scale 1.
  nlohmann::json fp16_table = nlohmann::json::object();
  std::map<std::string, std::vector<nlohmann::json>> steps;
  for (const std::string key : {"fp16", "fp16_none"}) {
    if (failed.count(key)) continue;
    nlohmann::json rows = nlohmann::json::array();
    for (const nlohmann::json& s : loss_results[key].at("memory_precision").at("fp16_steps")) {
      steps[key].push_back(s);
      rows.push_back({{"step", s.at("step")}, {"scale", s.at("scale").at(0)}, {"skipped", s.at("skipped").at(0)},
                      {"flushed_fraction", s.at("flushed_fraction").at(0)},
                      {"flushed_fraction_unscaled", s.at("flushed_fraction_unscaled").at(0)}});
    }
    fp16_table[key] = rows;
  }
  auto at = [&](const std::string& key, size_t step, const char* field) {
    return steps[key].at(step).at(field).at(0).get<double>();
  };
  fmt::print("\nfp16, rank 0: % of its nonzero gradients flushed to zero in fp16 at the step's scale (unscaled: at "
             "scale 1), the scale, skipped steps\n");
  fmt::print("{:>5} {:>40} {:>22}\n", "step", "dynamic scaler: scale, flushed, unscaled", "unscaled run: flushed");
  const size_t fp16_steps = std::max(steps["fp16"].size(), steps["fp16_none"].size());
  for (size_t s = 0; s < fp16_steps; ++s) {
    const size_t step = s + 1;
    if (!(step <= 3 || step % 10 == 0 || step == fp16_steps)) continue;
    std::string line = fmt::format("{:>5}", step);
    if (s < steps["fp16"].size()) {
      line += fmt::format(" {:>16g} {:>10.3f}% {:>10.3f}%{}", at("fp16", s, "scale"),
                          100 * at("fp16", s, "flushed_fraction"), 100 * at("fp16", s, "flushed_fraction_unscaled"),
                          at("fp16", s, "skipped") > 0 ? " skipped" : "        ");
    } else {
      line += fmt::format(" {:>48}", "-");
    }
    line += s < steps["fp16_none"].size() ? fmt::format(" {:>21.3f}%", 100 * at("fp16_none", s, "flushed_fraction"))
                                          : fmt::format(" {:>22}", "-");
    fmt::print("{}\n", line);
  }
  auto mean_of = [&](const std::string& key, const char* field) {
    double sum = 0;
    for (size_t s = 0; s < steps[key].size(); ++s) sum += at(key, s, field);
    return steps[key].empty() ? std::nan("") : sum / static_cast<double>(steps[key].size());
  };
  int skipped = 0;
  for (size_t s = 0; s < steps["fp16"].size(); ++s) skipped += at("fp16", s, "skipped") > 0;
  fmt::print("mean over the steps: dynamic scaler {:.3f}% flushed ({:.3f}% at scale 1), {} step{} skipped; unscaled "
             "run {:.3f}% flushed\n",
             100 * mean_of("fp16", "flushed_fraction"), 100 * mean_of("fp16", "flushed_fraction_unscaled"), skipped,
             skipped == 1 ? "" : "s", 100 * mean_of("fp16_none", "flushed_fraction"));
  if (!o.json.empty()) {
    io::write_json_file(o.json, {{"bench", "bench_precision"}, {"model", o.model}, {"rounds", o.rounds},
                                 {"batch", o.batch}, {"seq", o.seq}, {"iterations", o.iterations},
                                 {"memory", table}, {"loss_steps", o.loss_steps}, {"loss_world", o.loss_world},
                                 {"loss_batch", o.loss_batch}, {"micro_batches", o.micro_batches},
                                 {"losses", loss_table}, {"fp16_steps", fp16_table}});
  }
  if (!o.figure.empty()) {
    const fs::path datafile = fs::path(o.figure).replace_extension(".dat");
    io::write_file_atomically(datafile, data + "\n\n" + losses_data);
    const ProcessResult r =
        run_process({"gnuplot", "-e",
                     fmt::format("datafile='{}'; outfile='{}'; provenance='bench_precision, {}, batch {} x {}, {} "
                                 "rounds; losses at {} ranks, batch {}'",
                                 datafile.string(), o.figure, o.model, o.batch, o.seq, o.rounds, o.loss_world,
                                 o.loss_batch),
                     (fs::path(DTLAB_SOURCE_DIR) / "plots" / "precision.gp").string()},
                    120);
    if (r.exit_code != 0) throw Error("gnuplot failed on plots/precision.gp:\n" + r.output);
    fmt::print("figure: {}\n", o.figure);
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  return run_main("bench_precision", [&]() -> int {
    Options o;
    CLI::App app{"The precision exercise: activation memory and step time against the number of layers for no, "
                 "every-block and every-second-block checkpointing; fp32, bf16 and fp16 (scaled, unscaled) losses"};
    app.add_option("--model", o.model, "GPT-2 shape (preset) whose depth --layers varies")->capture_default_str();
    app.add_option("--layers", o.layers, "Blocks of the memory runs (--n_layer), e.g. 2,4,8")
        ->delimiter(',')
        ->capture_default_str();
    app.add_option("--rounds", o.rounds, "Alternating rounds of every memory configuration")->capture_default_str();
    app.add_option("--batch", o.batch, "Rows per step of the memory runs (one rank)")->capture_default_str();
    app.add_option("--seq", o.seq, "Tokens per row (--max_length)")->capture_default_str();
    app.add_option("--iterations", o.iterations, "Steps per memory run, the first discarded")->capture_default_str();
    app.add_option("--threads", o.threads,
                   "Intra-op threads of a memory run (0: every core; 1 keeps the times steadier on a shared machine)")
        ->capture_default_str();
    app.add_option("--loss_steps", o.loss_steps, "Steps of each loss run")->capture_default_str();
    app.add_option("--loss_world", o.loss_world, "Ranks of the loss runs")->capture_default_str();
    app.add_option("--loss_batch", o.loss_batch, "Global batch of the loss runs")->capture_default_str();
    app.add_option("--micro_batches", o.micro_batches, "Micro-batches of each rank's batch in the loss runs")
        ->capture_default_str();
    app.add_option("--learning_rate", o.learning_rate, "AdamW's learning rate")->capture_default_str();
    app.add_option("--loss_scale_init", o.loss_scale_init, "The scaler's first scale (fp16)")->capture_default_str();
    app.add_option("--scale_growth_interval", o.growth_interval, "Good steps before the scale doubles (fp16)")
        ->capture_default_str();
    app.add_option("--json", o.json, "Also write the tables to this file");
    app.add_option("--figure", o.figure, "Also draw plots/precision.gp to this SVG (and its .dat beside it)");
    app.add_option("--scratch", o.scratch, "Folder for the data and the runs (default: the temp folder)");
    if (auto stop = parse_flags(app, argc, argv)) return *stop;
    return run(o);
  });
}
