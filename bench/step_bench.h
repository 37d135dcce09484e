// What the step benchmarks (bench_task1, bench_gpt2) share: the flags --profile, --plain and
// --versus_plain, and the runner of the last.
//
// --versus_plain ROUNDS: the kit's step against the same model written the obvious way
// (model/ops.h: torch::nn::Linear's forward, torch::dropout, glibc's allocator defaults), each
// side a fresh process of this benchmark (`--plain` for the obvious one), the order alternating
// from round to round so that a slow spell of a shared machine falls on both. Prints each round's
// s/iter and kit / plain, then the median: a regression of the kit's own step shows here, without
// Python (bench/compare_eager.py compares with eager PyTorch).
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/tooling/process.h"

namespace dtlab::bench {

struct StepBenchFlags {
  std::filesystem::path profile;  // --profile DIR (report/profile.h)
  bool plain = false;             // --plain (model/ops.h)
  int versus_plain = 0;           // --versus_plain ROUNDS
};

// what_plain: what --plain changes in this benchmark's model.
inline void add_step_bench_flags(CLI::App& app, StepBenchFlags& f, const std::string& what_plain) {
  app.add_option("--profile", f.profile,
                 "After the timed steps, profile 3 more of each model into DIR/<model>/ "
                 "(trace.json, profile.txt; report/profile.h)");
  app.add_flag("--plain", f.plain, "Time the same model written the obvious way (model/ops.h: " + what_plain +
                                       ", glibc's allocator defaults)");
  app.add_option("--versus_plain", f.versus_plain,
                 "Instead: ROUNDS rounds of the kit's step and --plain's, each in a fresh process, alternating");
}

inline double seconds_per_iteration(const std::vector<std::string>& argv) {
  const ProcessResult r = run_process(argv, 3600);
  if (r.exit_code != 0) {
    throw Error(fmt::format("{} failed (exit {}):\n{}", argv.front(), r.exit_code,
                            r.output.substr(r.output.size() > 2000 ? r.output.size() - 2000 : 0)));
  }
  // The JSON is the last line (--json -).
  std::string last = r.output;
  while (!last.empty() && last.back() == '\n') last.pop_back();
  last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
  return nlohmann::json::parse(last).at("models").at(0).at("seconds_per_iteration").at("mean").get<double>();
}

inline int versus_plain(const std::vector<std::string>& shared_flags, const std::vector<std::string>& models,
                        int rounds) {
  if (rounds < 1) throw Error("--versus_plain: the number of rounds must be at least 1");
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  fmt::print("kit's step against the obvious step (--plain: torch::nn::Linear, torch::dropout, glibc's "
             "allocator defaults), {} rounds, fresh processes, order alternating\n", rounds);
  for (const std::string& model : models) {
    std::vector<double> ratios;
    for (int r = 0; r < rounds; ++r) {
      std::vector<std::string> kit = {self, "--models", model, "--json", "-"};
      kit.insert(kit.end(), shared_flags.begin(), shared_flags.end());
      std::vector<std::string> plain = kit;
      plain.push_back("--plain");
      double kit_s = 0, plain_s = 0;
      if (r % 2 == 0) {
        kit_s = seconds_per_iteration(kit);
        plain_s = seconds_per_iteration(plain);
      } else {
        plain_s = seconds_per_iteration(plain);
        kit_s = seconds_per_iteration(kit);
      }
      ratios.push_back(kit_s / plain_s);
      fmt::print("  {} round {} ({} first): kit {:.3f} s/iter, plain {:.3f} s/iter, kit/plain {:.3f}\n", model, r + 1,
                 r % 2 == 0 ? "kit" : "plain", kit_s, plain_s, ratios.back());
      std::fflush(stdout);
    }
    std::vector<double> sorted = ratios;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    const double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    fmt::print("{}: kit/plain median {:.3f} over {} rounds (min {:.3f}, max {:.3f})\n", model, median, n,
               sorted.front(), sorted.back());
  }
  return 0;
}

}  // namespace dtlab::bench
