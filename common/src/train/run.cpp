// Setting a run up, see train/run.h.
#include "dtlab/train/run.h"

#include <fmt/format.h>
#include <torch/types.h>
#include <torch/version.h>

#include "dtlab/core/device.h"
#include "dtlab/core/error.h"
#include "dtlab/dist/every_rank.h"
#include "dtlab/report/peak_flops.h"
#include "dtlab/train/runtime.h"

namespace dtlab::train {

Run plan_run(std::string name, const dist::LaunchFlags* launch) {
  Run run;
  run.name = std::move(name);
  if (launch) run.settings = dist::resolve_settings(*launch, dist::launcher_environment());
  require_backend_usable(run.settings.backend, cuda_availability());
  return run;
}

void start_run(Run& run, const SetupFunction& setup, int threads) {
  if (setup) {
    run.group = setup(run.settings);
    if (!run.group) throw Error(run.name + ": setup returned no process group");
    run.device = run.group->device();
    use_device(run.device);
  }
  // Ranks on one machine share its cores, also when they are different hosts to the network
  // (network namespaces): each takes its share.
  run.threads = configure_threads(threads, run.group ? run.group->ranks_on_this_machine() : 1);
}

namespace {

// One row per rank of `mine`, gathered over the run's group (a collective; one process: its own).
std::vector<std::vector<double>> every_rank(Run& run, const std::vector<double>& mine, const std::string& tag) {
  return run.group ? dist::every_rank(*run.group, mine, tag) : std::vector<std::vector<double>>{mine};
}

// Column `at` of every rank's row, as byte counts (-1 where the kernel or the meter gave none).
nlohmann::json column(const std::vector<std::vector<double>>& ranks, size_t at) {
  nlohmann::json values = nlohmann::json::array();
  for (const auto& r : ranks) values.push_back(static_cast<int64_t>(r[at]));
  return values;
}

}  // namespace

nlohmann::json memory_section(Run& run) {
  // Byte counts below 2^53 travel exactly as doubles.
  const std::vector<double> mine = {static_cast<double>(run.after_startup.rss_bytes),
                                    static_cast<double>(run.load_peak_rss_bytes),
                                    static_cast<double>(run.steps_peak_rss_bytes),
                                    run.peak_reset ? 1.0 : 0.0,
                                    static_cast<double>(run.tensor_steps_peak_bytes),
                                    static_cast<double>(run.parameter_bytes),
                                    static_cast<double>(run.optimizer_state_bytes),
                                    static_cast<double>(run.gradient_bytes)};
  const std::vector<std::vector<double>> ranks = every_rank(run, mine, "memory");
  bool reset = true;
  for (const auto& r : ranks) reset &= r[3] == 1;
  nlohmann::json m = {{"rss_after_startup_bytes", column(ranks, 0)},
                      {"load_peak_rss_bytes", column(ranks, 1)},
                      {"steps_peak_rss_bytes", column(ranks, 2)},
                      // false where a kernel refused to reset its peak (/proc/self/clear_refs): then the
                      // steps' peak is the process's whole peak, loading included, and the line says so.
                      {"peak_reset", reset}};
  if (run.tensor_steps_peak_bytes >= 0) {
    // The tensors' own figures (report/tensor_bytes.h): what the resident set holds of them.
    m["tensor_steps_peak_bytes"] = column(ranks, 4);
    m["parameter_bytes"] = column(ranks, 5);
    m["optimizer_state_bytes"] = column(ranks, 6);
    m["gradient_bytes"] = column(ranks, 7);
    // The peak less those three: the activations the backward still needed, the batch, the step's
    // temporaries and whatever else lived then (the data set's tensors among them). A lower bound
    // of those: the peak may come before every gradient exists (they are allocated in backward)
    // or, at step 1, before AdamW's moments. -1 where the gradients were not measured.
    nlohmann::json rest = nlohmann::json::array();
    for (const auto& r : ranks) {
      rest.push_back(r[7] < 0 ? int64_t{-1} : static_cast<int64_t>(r[4] - r[5] - r[6] - r[7]));
    }
    m["activations_and_rest_at_peak_bytes"] = rest;
  }
  return m;
}

std::string memory_line(const nlohmann::json& m) {
  const auto& startup = m.at("rss_after_startup_bytes");
  const auto& load = m.at("load_peak_rss_bytes");
  const auto& train = m.at("steps_peak_rss_bytes");
  constexpr double kMiB = 1.0 / (1 << 20);
  auto mib = [&](const nlohmann::json& v) { return kMiB * v.get<double>(); };
  if (train.empty() || train.at(0).get<int64_t>() < 0) return "memory: the kernel gives no resident set here";
  std::string line = fmt::format(
      "memory: rank 0 held at most {:.1f} MiB in its training steps ({:.1f} MiB after start-up, so +{:.1f} MiB; "
      "loading peaked at {:.1f} MiB)",
      mib(train.at(0)), mib(startup.at(0)), mib(train.at(0)) - mib(startup.at(0)), mib(load.at(0)));
  if (!m.value("peak_reset", true)) {
    line += "; the kernel would not reset its peak (/proc/self/clear_refs), so the steps' peak includes loading";
  }
  if (m.contains("tensor_steps_peak_bytes") && m.at("tensor_steps_peak_bytes").at(0).get<int64_t>() >= 0) {
    line += fmt::format("; its tensors {:.1f} MiB at the steps' peak: parameters {:.1f}, optimiser state {:.1f}",
                        mib(m.at("tensor_steps_peak_bytes").at(0)), mib(m.at("parameter_bytes").at(0)),
                        mib(m.at("optimizer_state_bytes").at(0)));
    if (m.at("gradient_bytes").at(0).get<int64_t>() >= 0) {
      line += fmt::format(", gradients {:.1f}, activations and the rest {:.1f} MiB", mib(m.at("gradient_bytes").at(0)),
                          mib(m.at("activations_and_rest_at_peak_bytes").at(0)));
    } else {
      line += " MiB (gradients not measured: the step does not end in the kit's apply_update)";
    }
  }
  if (train.size() > 1) {
    line += "; every rank, steps' peak - after start-up:";
    for (size_t r = 0; r < train.size(); ++r) {
      line += fmt::format(" {:.1f}", mib(train.at(r)) - mib(startup.at(r)));
    }
    line += " MiB";
  }
  return line;
}

nlohmann::json compute_section(Run& run, const std::function<double(double sequence)>& flops_per_token,
                               const nlohmann::json& timing) {
  // Every rank at once (Note [The machine's peak]).
  if (run.group) run.group->barrier("peak flops");
  const std::vector<std::vector<double>> ranks =
      every_rank(run, {report::measure_matmul_flops()}, "peak flops");
  std::vector<double> peaks;
  double total = 0;
  for (const auto& r : ranks) {
    peaks.push_back(r[0]);
    total += r[0];
  }
  nlohmann::json c = {{"peak_flops_per_second", peaks},
                      {"peak_benchmark", fmt::format("8 fp32 512 x 512 x 512 matrix products in a row, {} thread{} a "
                                                     "rank, every rank at once after training",
                                                     run.threads, run.threads == 1 ? "" : "s")}};
  const double examples = timing.value("examples_per_second", 0.0), padded = timing.value("padded_tokens_per_second", 0.0);
  if (examples > 0 && padded > 0 && total > 0) {
    const double sequence = padded / examples;  // the rows' mean padded length
    const double per_token = flops_per_token(sequence);
    c["sequence_length"] = sequence;
    c["model_flops_per_token"] = per_token;
    c["model_flops_per_second"] = per_token * padded;
    c["mfu"] = per_token * padded / total;
  }
  return c;
}

std::string compute_line(const nlohmann::json& c) {
  if (!c.contains("mfu")) return "";
  const auto& peaks = c.at("peak_flops_per_second");
  double total = 0;
  for (const auto& p : peaks) total += p.get<double>();
  return fmt::format("compute: {:.2f} GFLOP/s of model FLOPs, MFU {:.1f}% of {} measured peak ({:.1f} GFLOP/s, "
                     "Note [The machine's peak])",
                     1e-9 * c.at("model_flops_per_second").get<double>(), 100 * c.at("mfu").get<double>(),
                     peaks.size() == 1 ? std::string("the rank's") : fmt::format("the {} ranks'", peaks.size()),
                     1e-9 * total);
}

nlohmann::json Run::environment() const {
  const BlasInfo blas = detect_blas();
  return {{"hostname", host_name()}, {"libtorch", TORCH_VERSION},
          {"libtorch_build", libtorch_build()}, {"blas", blas.name},
          {"blas_library", blas.path}, {"threads", threads}, {"world_size", world()},
          {"backend", group ? nlohmann::json(group->backend()) : nlohmann::json()},
          {"device", device.str()},
          {"launcher", settings.source},
          {"ranks_on_this_host", group ? group->local_world_size() : 1},
          {"ranks_on_this_machine", group ? group->ranks_on_this_machine() : 1}};
}

std::string Run::describe_ranks() const {
  if (!group) return "";
  return fmt::format("{} ({}), backend {} on {}, master {}:{}, timeout {:g} s; {} on this host, {} sharing this "
                     "machine's cores, {} thread{} each{}",
                     world(), settings.source, group->backend(), device.str(), settings.master_addr, settings.master_port,
                     settings.timeout.count() / 1000.0, group->local_world_size(), group->ranks_on_this_machine(),
                     threads, threads == 1 ? "" : "s",
                     group->checks_collectives() ? "; every collective checked across ranks (--distributed_debug)" : "");
}

}  // namespace dtlab::train
