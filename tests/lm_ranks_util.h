// A GPT-2 exercise run end to end as processes on the small language-model fixture
// (lm_fixture_util.h): every rank on loopback with the flags the grader's equivalence runs use
// (clipping on, the fixture's gradient norms being above 0.5; a fixed seed; no evaluation), and
// rank 0's results.json. pp_test and tp_run_test share it.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "dtlab/io/json_file.h"
#include "process_test_util.h"
#include "test_util.h"

namespace dtlab::test {

struct LmRanksRun {
  std::filesystem::path out;  // the output folder: results.json, and the model rank 0 saves
  std::vector<ChildExit> exits;
  nlohmann::json results;  // rank 0's
  bool ok() const {
    return std::all_of(exits.begin(), exits.end(), [](const ChildExit& e) { return e.exit_code == 0; });
  }
};

struct LmRanksOptions {
  int steps = 6;
  std::string dropout = "0";
  int timeout = 20;  // --timeout: every wait on another rank
  int threads = 1;   // --threads: each rank's intra-op threads
};

// `binary` on `world` ranks, trained on the fixture in `fixture` (its gpt2/ and translation/),
// writing into a fresh folder named after `name`; `flags` come last.
inline LmRanksRun run_lm_ranks(const std::string& binary, const std::filesystem::path& fixture,
                               const std::string& name, int world, const std::vector<std::string>& flags,
                               const LmRanksOptions& o = {}) {
  const std::filesystem::path dir = fresh_temp_dir(name);
  const std::string port = std::to_string(free_port());
  const auto argv_of = [&](int rank) {
    std::vector<std::string> args = {binary, "--model_name_or_path", (fixture / "gpt2").string(), "--data_dir",
                                     (fixture / "translation").string(), "--dropout", o.dropout, "--learning_rate",
                                     "1e-3", "--max_grad_norm", "0.5", "--max_steps", std::to_string(o.steps),
                                     "--no_eval", "--threads", std::to_string(o.threads), "--seed", "42",
                                     "--overwrite_output_dir", "--output_dir", (dir / "out").string(),
                                     "--master_ip", "127.0.0.1",
                                     "--master_port", port, "--world_size", std::to_string(world), "--local_rank",
                                     std::to_string(rank), "--timeout", std::to_string(o.timeout)};
    args.insert(args.end(), flags.begin(), flags.end());
    return args;
  };
  LmRanksRun run;
  run.out = dir / "out";
  run.exits = run_ranks(world, argv_of, dir / "logs", 180);
  if (std::filesystem::exists(run.out / "results.json")) run.results = io::read_json_file(run.out / "results.json");
  return run;
}

}  // namespace dtlab::test
