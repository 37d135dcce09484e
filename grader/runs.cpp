// Making and recording the runs the checks read, see runs.h.
#include "runs.h"

#include <fmt/format.h>

#include <algorithm>

#include "dtlab/core/error.h"
#include "fork_ranks.h"
#include "dtlab/io/json_file.h"
#include "reference_cache.h"

namespace fs = std::filesystem;

namespace dtlab::grader {


uint64_t prune_runs(const fs::path& runs) {
  std::error_code ec;
  if (!fs::is_directory(runs, ec)) return 0;
  auto kept = [](const fs::path& relative) {
    const std::string name = relative.string();
    if (name == "run.json" || name == "sandbox.log" || name == "output/results.json") return true;
    if (relative.has_parent_path()) return false;
    const std::string ext = relative.extension().string();
    return name.rfind("rank", 0) == 0 && (ext == ".log" || ext == ".beat");
  };
  uint64_t removed = 0;
  for (const auto& run : fs::directory_iterator(runs, ec)) {
    if (!run.is_directory(ec)) continue;
    std::vector<fs::path> doomed;
    for (auto it = fs::recursive_directory_iterator(run.path(), ec); it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (ec) break;  // an unreadable folder: what was found so far goes
      // Regular files only: the grader wrote every file here itself (Note [The sandbox]).
      if (!it->is_regular_file(ec) || kept(fs::relative(it->path(), run.path(), ec))) continue;
      removed += it->file_size(ec);
      doomed.push_back(it->path());
    }
    for (const auto& p : doomed) fs::remove(p, ec);
    // Folders left empty (dump/, output/ of a run that wrote only a dump).
    for (const char* folder : {"dump", "output"}) {
      if (fs::is_directory(run.path() / folder, ec) && fs::is_empty(run.path() / folder, ec)) fs::remove(run.path() / folder, ec);
    }
  }
  return removed;
}

double stall_floor_seconds(double collective_timeout) {
  return std::max(kStallFloorSeconds, collective_timeout + kFailureGraceSeconds);
}

bool checks_collectives(const std::string& purpose) {
  for (const char* measured : {"timing", "traffic", "bucket-sweep", "learning"}) {
    if (purpose.find(measured) != std::string::npos) return false;
  }
  return true;
}

std::string describe(const RunRequest& r) {
  return single_process(r.exercise)
             ? r.exercise
             : fmt::format("{} at {} rank{}", r.exercise, r.world, r.world == 1 ? "" : "s");
}

Runner::Runner(GradeOptions options) : options_(std::move(options)) {}

bool Runner::grades(const std::string& check_id) const {
  return options_.only.empty() || std::find(options_.only.begin(), options_.only.end(), check_id) != options_.only.end();
}

const Run& Runner::run(const RunRequest& request) {
  if (auto it = done_.find(request.id); it != done_.end()) return it->second;
  const GradeOptions& o = options_;
  Run run;
  run.id = request.id;
  run.dir = o.results_dir / "runs" / request.id;
  fs::remove_all(run.dir);
  fs::create_directories(run.dir);
  // The ranks write into their sandbox's scratch folder; the grader reads its copy in run.dir.
  const std::string output = "{scratch}/output";

  LaunchSpec spec;
  spec.binary = o.binaries.at(request.exercise);
  spec.fork_ranks = fork_ranks_by_default();
  spec.world_size = request.world;
  spec.timeout_seconds = o.run_timeout;
  spec.grace_seconds = o.collective_timeout + kFailureGraceSeconds;
  const bool distributed = !single_process(request.exercise);
  if (trains_gpt2(request.exercise)) {
    // A request for a shape (--model_config) draws the model at random, with the fixture's
    // tokenizer; any other trains the fixture's GPT-2.
    const bool shape = std::find(request.flags.begin(), request.flags.end(), "--model_config") != request.flags.end();
    spec.args = {shape ? "--tokenizer_dir" : "--model_name_or_path", (o.fixtures / "gpt2-tiny").string(),
                 "--data_dir", (o.fixtures / "translation").string(), "--output_dir", output,
                 "--overwrite_output_dir", "--no_save"};
    // Seed 42 unless the request sets its own (the partition check draws with another).
    if (std::find(request.flags.begin(), request.flags.end(), "--seed") == request.flags.end()) {
      spec.args.insert(spec.args.end(), {"--seed", "42"});
    }
  } else {
    spec.args = {"--model_name_or_path", (o.fixtures / "bert-tiny").string(), "--data_dir",
                 (o.fixtures / "RTE").string(), "--task_name", "RTE", "--seed", "42",
                 "--output_dir", output, "--overwrite_output_dir"};
    if (request.exercise == kReference || exercise(request.exercise).kind != "traffic") {
      spec.args.insert(spec.args.end(), {"--do_train", "--no_save"});
    }
  }
  if (o.threads > 0) spec.args.insert(spec.args.end(), {"--threads", std::to_string(o.threads)});
  if (distributed) {
    spec.args.insert(spec.args.end(), {"--master_ip", "{master}", "--master_port", "{port}", "--world_size",
                                       "{world}", "--local_rank", "{rank}", "--timeout",
                                       fmt::format("{:g}", o.collective_timeout), "--backend", o.backend});
    if (checks_collectives(request.purpose)) spec.args.push_back("--distributed_debug");
    // Note [A run that stalls] (launch.cpp): each rank's kit writes its heartbeat beside its log,
    // where the launcher watches it and from where it comes back for the verdict.
    spec.args.insert(spec.args.end(), {"--beat_file", std::string(kBeatFile)});
    spec.beat_file = kBeatFile;
    spec.stall_floor_seconds = stall_floor_seconds(o.collective_timeout);
    spec.stall_factor = kStallFactor;
  }
  if (request.dump) {
    run.dump_dir = run.dir / "dump";
    spec.args.insert(spec.args.end(), {"--dump_dir", "{scratch}/dump"});
  }
  spec.args.insert(spec.args.end(), request.flags.begin(), request.flags.end());

  SandboxRun sandboxed{spec, run.dir, {o.fixtures}};
  // The grader's own files a run reads (a training order) are mounted read-only beside it.
  for (const auto& flag : request.flags) {
    std::error_code ec;
    if (!flag.empty() && flag[0] == '/' && fs::is_regular_file(flag, ec)) sandboxed.inputs.push_back(flag);
  }
  const std::string what = describe(request);
  // Note [A reference run made once]: the kit's own runs only, never a submission's.
  const bool cached = !o.reference_cache.empty() && (request.exercise == kReference || request.exercise == kReferenceGpt2);
  const std::string key = cached ? reference_key(request.id, spec.binary, spec.args, environment_passed_to_runs()) : "";
  if (cached && restore_reference(o.reference_cache, key, run.dir)) {
    run.from_cache = key;
    run.launch.ranks.push_back(RankExit{0, 0, 0, false, 0, run.dir / "rank0.log"});
  } else {
    try {
      const SandboxResult result = run_in_sandbox(o.sandbox, sandboxed);
      run.launch = result.launch;
      run.left_out = result.left_out;
      run.sandbox_seconds = result.sandbox_seconds;
      RunEvidence evidence;
      if (!spec.beat_file.empty()) {
        for (int r = 0; r < request.world; ++r) {
          evidence.beats.push_back(read_beat_file(run.dir / ("rank" + std::to_string(r) + ".beat")));
        }
      }
      run.failure = diagnose(run.launch, what, evidence);
      if (!run.launch.stopped.empty()) run.failure = Verdict{Status::kCrash, what + ": " + run.launch.stopped};
    } catch (const Error& e) {
      run.failure = Verdict{Status::kError, what + ": " + e.what()};
    }
  }
  const fs::path results = run.dir / "output" / "results.json";
  if (fs::exists(results)) {
    try {
      run.results = io::read_json_file(results);
    } catch (const Error& e) {
      if (!run.failure) run.failure = Verdict{Status::kError, what + ": " + e.what()};
    }
  } else if (!run.failure) {
    std::string why;
    for (const auto& l : run.left_out) {
      if (l.rfind("output/results.json ", 0) == 0) why = " " + l.substr(20);
    }
    run.failure = Verdict{Status::kError, what + ": finished without writing output/results.json" + why};
  }

  // What the sandbox did not bring back often explains a failure (a full scratch folder).
  if (run.failure && !run.left_out.empty()) {
    run.failure->message += "\n  not brought back from the sandbox: " + run.left_out.front() +
                            (run.left_out.size() > 1 ? fmt::format(" and {} more (run.json)", run.left_out.size() - 1) : "");
  }
  // A file the grading's bound left behind (sandbox.h, copy_grading_bytes): the checks would
  // read its absence as the run's own doing.
  for (const auto& l : run.left_out) {
    if (!run.failure && l.find("over the grading's limit") != std::string::npos) {
      run.failure = Verdict{Status::kError, what + ": not brought back from the sandbox: " + l};
    }
  }
  if (cached && run.from_cache.empty() && !run.failure && run.left_out.empty()) {
    store_reference(o.reference_cache, key, run.dir);
  }
  nlohmann::json command = nlohmann::json::array();
  for (const auto& a : rank_command(spec, 0, run.launch.port)) command.push_back(a);
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& r : run.launch.ranks) {
    ranks.push_back({{"rank", r.rank}, {"exit_code", r.exit_code}, {"signal", r.signal}, {"killed", r.killed},
                     {"seconds", r.seconds}, {"log", r.log.filename().string()}});
  }
  io::write_json_file(run.dir / "run.json",
                      {{"id", request.id}, {"exercise", request.exercise}, {"purpose", request.purpose},
                       {"world_size", request.world}, {"outcome", run.failure ? status_name(run.failure->status) : "ok"},
                       {"message", run.failure ? run.failure->message : ""}, {"seconds", run.launch.seconds},
                       {"sandbox", sandbox_mode_name(o.sandbox.mode)}, {"sandbox_seconds", run.sandbox_seconds},
                       {"stalled_seconds", run.launch.stalled_seconds}, {"stall_bound_seconds", run.launch.stall_bound_seconds},
                       {"left_out", run.left_out}, {"command", command}, {"ranks", ranks},
                       {"reference_cache", run.from_cache}});
  return done_.emplace(request.id, std::move(run)).first->second;
}

}  // namespace dtlab::grader
