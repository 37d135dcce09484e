// bench_dp_gpt2: the dp exercise's step (dp-solution: forward, loss over the global batch's
// target tokens, backward, average_gradients, clipping, AdamW) for the gpt2-mini preset and GPT-2
// small's shape at 1, 2 and 4 ranks, with the batch per rank fixed (weak scaling, 8 x 128 tokens
// per rank) and with the global batch fixed (strong scaling, 8 rows over all ranks). It prints
// s/iter, tokens/s summed over ranks and the share of the step spent in average_gradients.
//
// The ranks are the real binary's processes on loopback, as a student starts them. The data:
// the translation fixture's pairs joined six at a time, so that rows fill max_length 128 (the
// fixture's own rows are about 30 tokens); the tokenizer gpt2_fixtures.h trains on them (its
// vocabulary, about 1,500 tokens, is the dp exercise's, not GPT-2's 50,257: the LM head is
// correspondingly smaller); random weights of the named shape. A handful of validation rows keeps the one evaluation at the
// end short. On one machine the ranks share its cores: the table shows what data parallelism
// costs here, not how it scales on a cluster.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
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
  std::vector<std::string> models = {"gpt2-mini", "gpt2"};
  std::vector<int> worlds = {1, 2, 4};
  int batch = 8;        // rows per rank (weak) or over all ranks (strong)
  int64_t seq = 128;
  int iterations = 6;   // the first is discarded
  std::string json;
  fs::path scratch;
};

struct Row {
  std::string model, scaling;
  int world = 1, batch_per_rank = 1;
  double seconds = 0, comm = 0, tokens = 0, padded = 0;
};

Row run_one(const Options& o, const fs::path& dir, const std::string& model, bool weak, int world) {
  Row row{model, weak ? "weak" : "strong", world, weak ? o.batch : o.batch / world};
  const fs::path out = dir / "runs" / fmt::format("{}-{}-w{}", model, row.scaling, world);
  fs::remove_all(out);
  grader::LaunchSpec spec;
  spec.binary = DTLAB_PROGRAM("dp-solution");
  spec.world_size = world;
  spec.log_dir = out;
  spec.timeout_seconds = 3600;
  spec.grace_seconds = 120;
  spec.args = {"--model_config", model, "--tokenizer_dir", (dir / "tokenizer").string(), "--data_dir",
               (dir / "data").string(), "--max_length", std::to_string(o.seq), "--global_batch_size",
               std::to_string(row.batch_per_rank * world), "--max_steps", std::to_string(o.iterations),
               "--bleu_examples", "0", "--samples", "0", "--log_first_steps", "0", "--no_save", "--seed", "42",
               "--output_dir", (out / "output").string(), "--overwrite_output_dir", "--master_ip", "{master}",
               "--master_port", "{port}", "--world_size", "{world}", "--local_rank", "{rank}", "--timeout", "600"};
  const grader::LaunchResult r = grader::launch_ranks(spec);
  if (!r.all_ok()) {
    throw Error(fmt::format("{} {} at {} ranks failed; rank 0's log {}:\n{}", model, row.scaling, world,
                            (out / "rank0.log").string(), grader::tail_lines(out / "rank0.log", 15)));
  }
  const nlohmann::json t = io::read_json_file(out / "output" / "results.json").at("timing");
  row.seconds = t.at("mean_seconds").get<double>();
  row.comm = t.at("mean_comm_seconds").get<double>();
  row.tokens = t.at("tokens_per_second").get<double>();
  row.padded = t.at("padded_tokens_per_second").get<double>();
  return row;
}

int run(const Options& o) {
  if (o.batch <= 0 || o.iterations < 2) throw Error("--batch must be positive and --iterations at least 2");
  for (int w : o.worlds) {
    if (w <= 0 || o.batch % w != 0) {
      throw Error(fmt::format("--worlds: {} ranks cannot share a global batch of {} (--batch)", w, o.batch));
    }
  }
  const fs::path dir = o.scratch.empty() ? fs::temp_directory_path() / "dtlab-bench-dp-gpt2" : o.scratch;
  bench::write_joined_pairs(dir);
  fmt::print("bench_dp_gpt2: dp-solution, rows of {} tokens, the fixture tokenizer's vocabulary of {} (as the dp "
             "exercise trains), {} iterations per run (the first discarded); {} cores on this machine, shared by "
             "all ranks, loopback\n",
             o.seq, io::read_json_file(dir / "tokenizer" / "config.json").at("vocab_size").get<int64_t>(),
             o.iterations, std::thread::hardware_concurrency());
  fmt::print("{:<10} {:<7} {:>5} {:>10} {:>9} {:>16} {:>14} {:>12}\n", "model", "scaling", "ranks", "batch/rank",
             "s/iter", "tokens/s (all)", "with padding", "in average_gradients");
  nlohmann::json rows = nlohmann::json::array();
  for (const std::string& model : o.models) {
    for (const bool weak : {true, false}) {
      for (int world : o.worlds) {
        const Row r = run_one(o, dir, model, weak, world);
        fmt::print("{:<10} {:<7} {:>5} {:>10} {:>9.3f} {:>16.0f} {:>14.0f} {:>11.0f}%\n", r.model, r.scaling, r.world,
                   r.batch_per_rank, r.seconds, r.tokens, r.padded, r.seconds > 0 ? 100 * r.comm / r.seconds : 0.0);
        std::fflush(stdout);
        rows.push_back({{"model", r.model}, {"scaling", r.scaling}, {"world_size", r.world},
                        {"batch_per_rank", r.batch_per_rank}, {"seq", o.seq}, {"seconds_per_iteration", r.seconds},
                        {"comm_seconds_per_iteration", r.comm}, {"tokens_per_second", r.tokens},
                        {"padded_tokens_per_second", r.padded}});
      }
    }
  }
  if (!o.json.empty()) io::write_json_file(o.json, {{"bench", "bench_dp_gpt2"}, {"rows", rows}});
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  return run_main("bench_dp_gpt2", [&]() -> int {
    Options o;
    CLI::App app{"Times the dp exercise's step (dp-solution) at 1, 2, 4 ranks, weak and strong scaling"};
    app.add_option("--models", o.models, "GPT-2 shapes (presets)")->capture_default_str();
    app.add_option("--worlds", o.worlds, "World sizes")->capture_default_str();
    app.add_option("--batch", o.batch, "Rows per rank (weak scaling) and over all ranks (strong)")
        ->capture_default_str();
    app.add_option("--seq", o.seq, "Tokens per row (--max_length)")->capture_default_str();
    app.add_option("--iterations", o.iterations, "Steps per run, the first discarded")->capture_default_str();
    app.add_option("--json", o.json, "Also write the table to this file");
    app.add_option("--scratch", o.scratch, "Folder for the data and the runs (default: the temp folder)");
    if (auto stop = parse_flags(app, argc, argv)) return *stop;
    return run(o);
  });
}
