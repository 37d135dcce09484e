// Setting a run up, see train/run.h.
#include "dtlab/train/run.h"

#include <fmt/format.h>
#include <torch/types.h>
#include <torch/version.h>

#include "dtlab/core/device.h"
#include "dtlab/core/error.h"
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

nlohmann::json memory_section(Run& run) {
  std::vector<int64_t> mine = {run.after_startup.rss_bytes, run.load_peak_rss_bytes, run.steps_peak_rss_bytes,
                               run.peak_reset ? 1 : 0};
  std::vector<std::vector<int64_t>> ranks = {mine};
  if (run.group) {
    ranks.clear();
    const torch::Tensor t = torch::tensor(mine, torch::kInt64).to(run.device);
    for (const torch::Tensor& r : run.group->all_gather(t, "memory")) {
      const torch::Tensor c = r.cpu();
      ranks.push_back(std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()));
    }
  }
  nlohmann::json startup = nlohmann::json::array(), load = nlohmann::json::array(),
                 train = nlohmann::json::array();
  bool reset = true;
  for (const auto& r : ranks) {
    startup.push_back(r[0]);
    load.push_back(r[1]);
    train.push_back(r[2]);
    reset &= r[3] == 1;
  }
  return {{"rss_after_startup_bytes", startup},
          {"load_peak_rss_bytes", load},
          {"steps_peak_rss_bytes", train},
          // false where a kernel refused to reset its peak (/proc/self/clear_refs): then the steps'
          // peak is the process's whole peak, loading included, and the line says so.
          {"peak_reset", reset}};
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
  if (train.size() > 1) {
    line += "; every rank, steps' peak - after start-up:";
    for (size_t r = 0; r < train.size(); ++r) {
      line += fmt::format(" {:.1f}", mib(train.at(r)) - mib(startup.at(r)));
    }
    line += " MiB";
  }
  return line;
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
