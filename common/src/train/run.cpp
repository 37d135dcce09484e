// Setting a run up, see train/run.h.
#include "dtlab/train/run.h"

#include <fmt/format.h>
#include <torch/version.h>

#include "dtlab/core/error.h"
#include "dtlab/train/runtime.h"

namespace dtlab::train {

Run plan_run(std::string name, const dist::LaunchFlags* launch) {
  Run run;
  run.name = std::move(name);
  if (launch) run.settings = dist::resolve_settings(*launch, dist::launcher_environment());
  return run;
}

void start_run(Run& run, const SetupFunction& setup, int threads) {
  if (setup) {
    run.group = setup(run.settings);
    if (!run.group) throw Error(run.name + ": setup returned no process group");
  }
  run.threads = configure_threads(threads, run.group ? run.group->local_world_size() : 1);
}

nlohmann::json Run::environment() const {
  const BlasInfo blas = detect_blas();
  return {{"hostname", host_name()}, {"libtorch", TORCH_VERSION}, {"blas", blas.name},
          {"blas_library", blas.path}, {"threads", threads}, {"world_size", world()},
          {"backend", group ? nlohmann::json(group->backend()) : nlohmann::json()},
          {"launcher", settings.source},
          {"ranks_on_this_host", group ? group->local_world_size() : 1}};
}

std::string Run::describe_ranks() const {
  if (!group) return "";
  return fmt::format("{} ({}), backend {}, master {}:{}, timeout {:g} s", world(), settings.source,
                     group->backend(), settings.master_addr, settings.master_port,
                     settings.timeout.count() / 1000.0);
}

}  // namespace dtlab::train
