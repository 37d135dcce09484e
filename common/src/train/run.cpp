// Setting a run up, see train/run.h.
#include "dtlab/train/run.h"

#include <fmt/format.h>
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
