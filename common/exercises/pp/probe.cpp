// pp --probe schedules: the student's schedule builders for every kind, n and m in 1..8 and every
// stage, and for arguments they must refuse, written to OUTPUT_DIR/results.json ({"exercise",
// "probe", "result"}) for grader/checks_pp.cpp to judge (by simulation, pipeline/simulate.h). It
// records; the grader decides what is right. A builder that throws for valid arguments is
// recorded with its message, so one bad case does not hide the others. It also records the
// intra-op threads it ran with ("threads"): a probe takes --threads as a training run does
// (common/src/lm/run.cpp), which pp_test holds it to.
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <filesystem>

#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/io/json_file.h"
#include "dtlab/lm/options.h"
#include "dtlab/tasks/pp.h"

namespace fs = std::filesystem;

namespace dtlab::pp {
namespace probe {

constexpr int kMaxShape = 8;

nlohmann::json call(const pipeline::ScheduleBuilder& build, int stage, int stages, int m) {
  try {
    return {{"actions", pipeline::schedule_text(build(stage, stages, m))}};
  } catch (const NotImplemented&) {
    throw;  // a TODO not done: the run stops with its words, as every run does
  } catch (const std::exception& e) {
    return {{"error", e.what()}};
  }
}

nlohmann::json schedules() {
  nlohmann::json out = nlohmann::json::array();
  for (const char* kind : {"gpipe", "1f1b"}) {
    const pipeline::ScheduleBuilder build =
        std::string(kind) == "gpipe" ? pipeline::ScheduleBuilder(gpipe_schedule) : one_f_one_b_schedule;
    for (int n = 1; n <= kMaxShape; ++n) {
      for (int m = 1; m <= kMaxShape; ++m) {
        nlohmann::json lists = nlohmann::json::array();
        for (int s = 0; s < n; ++s) lists.push_back(call(build, s, n, m));
        out.push_back({{"kind", kind}, {"n", n}, {"m", m}, {"stages", lists}});
      }
    }
    // Arguments to refuse: a stage out of range, no stage, no micro-batch.
    for (const auto& [stage, n, m] : std::vector<std::tuple<int, int, int>>{{2, 2, 4}, {-1, 2, 4}, {0, 0, 4}, {0, 2, 0}}) {
      out.push_back({{"kind", kind}, {"n", n}, {"m", m}, {"refuse", true}, {"stage", stage},
                     {"stages", nlohmann::json::array({call(build, stage, n, m)})}});
    }
  }
  return out;
}

}  // namespace probe

int run_probe(const lm::LmOptions& o) {
  if (o.output_dir.empty()) throw Error("--probe needs --output_dir (it writes OUTPUT_DIR/results.json)");
  if (o.probe != "schedules") throw Error("--probe " + o.probe + ": unknown (schedules)");
  fs::create_directories(o.output_dir);
  io::write_json_file(fs::path(o.output_dir) / "results.json",
                      {{"exercise", "pp"}, {"probe", o.probe}, {"threads", at::get_num_threads()},
                       {"result", probe::schedules()}});
  fmt::print("probe {}: {}\n", o.probe, (fs::path(o.output_dir) / "results.json").string());
  return kExitOk;
}

}  // namespace dtlab::pp
