// grader: launches the ranks of an exercise, checks what DESIGN.md says must hold, scores it
// for Gradescope, renders the report, and writes the skeletons and the student release.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "checks.h"
#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/core/skeleton.h"
#include "dtlab/core/subprocess.h"
#include "folder_lock.h"
#include "gradescope.h"
#include "launch.h"
#include "provenance.h"
#include "release.h"
#include "report.h"
#include "submission.h"

namespace fs = std::filesystem;
using namespace dtlab;
using namespace dtlab::grader;

namespace {

const fs::path kSourceDir = DTLAB_SOURCE_DIR;
const fs::path kBuildDir = DTLAB_BUILD_DIR;

bool has_solutions() { return fs::is_directory(kSourceDir / "solutions"); }

fs::path exercise_binary(const std::string& exercise, bool solutions) {
  return kBuildDir / (solutions ? exercise + "-solution" : exercise);
}

// The offline fixture every check trains on, made once by dtlab-fixtures.
fs::path ensure_fixtures() {
  const fs::path fixtures = kSourceDir / "fixtures";
  if (fs::exists(fixtures / "bert-tiny" / "config.json") && fs::exists(fixtures / "RTE" / "train.tsv")) return fixtures;
  const ProcessResult r = run_process({(kBuildDir / "tools" / "dtlab-fixtures").string(), "--out", fixtures.string()}, 300);
  if (r.exit_code != 0) throw Error("dtlab-fixtures could not write " + fixtures.string() + ":\n" + r.output);
  return fixtures;
}

// "all", one exercise, or several separated by commas, in the order they are taught.
std::vector<std::string> selected_exercises(const std::string& which) {
  if (which == "all") return exercise_names();
  std::vector<std::string> wanted;
  for (size_t start = 0; start <= which.size();) {
    const size_t comma = std::min(which.find(',', start), which.size());
    const std::string name = which.substr(start, comma - start);
    if (std::find(exercise_names().begin(), exercise_names().end(), name) == exercise_names().end()) {
      throw Error("no exercise '" + name + "': choose task1 task2a task2b task3 task4 (commas for several), or all");
    }
    wanted.push_back(name);
    start = comma + 1;
  }
  std::vector<std::string> ordered;
  for (const auto& e : exercise_names()) {
    if (std::find(wanted.begin(), wanted.end(), e) != wanted.end()) ordered.push_back(e);
  }
  return ordered;
}

// ---- grader list ------------------------------------------------------------------------------

int list_checks() {
  double total = 0;
  for (const auto& e : exercise_names()) {
    fmt::print("{}\n", e);
    for (const CheckSpec* c : checks_of(e)) {
      fmt::print("  {:<11} {:>2g} pt  {}\n", c->id, c->points, c->title);
      total += c->points;
    }
  }
  fmt::print("\n{:g} points. `grader check T` runs the checks of T; `grader check all` all of them.\n", total);
  return 0;
}

// ---- grader check -----------------------------------------------------------------------------

struct CheckFlags {
  std::string which;
  std::string submission;
  bool solutions = false;
  std::vector<std::string> use_binaries;  // T=PATH
  std::vector<std::string> only;          // check ids; empty: every check
  std::string results = "out/grade";
  int timing_iterations = 40;  // DESIGN.md
  double timeout = 30, run_timeout = 300;
  int threads = 0;
};

int check(const CheckFlags& f) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string> exercises = selected_exercises(f.which);
  if (f.solutions && !f.submission.empty()) throw Error("--solutions and --submission: give one of them");
  if (f.solutions && !has_solutions()) {
    throw Error("--solutions: this kit has no solutions/ folder (a student release); grade your own tree instead");
  }
  for (const auto& id : f.only) {
    bool known = false;
    for (const auto& e : exercises) {
      for (const CheckSpec* c : checks_of(e)) known |= c->id == id;
    }
    if (!known) throw Error("--only " + id + ": no such check of " + f.which + " (see `grader list`)");
  }
  GradeOptions options;
  options.results_dir = f.results;
  options.timing_iterations = f.timing_iterations;
  options.collective_timeout = f.timeout;
  options.run_timeout = f.run_timeout;
  options.threads = f.threads;
  options.binaries["reference"] = kBuildDir / "grader" / "dtlab-reference";

  std::string submission = f.solutions ? "reference solutions" : "your tasks/ (" + (kSourceDir / "tasks").string() + ")";
  fs::create_directories(options.results_dir);
  const FolderLock lock(options.results_dir);  // one grading per results folder (and build/)
  // The runs of an earlier grading would mix into this one's report.
  fs::remove_all(options.results_dir / "runs");
  fs::remove_all(options.results_dir / "report");

  // Past the flags, whatever fails still ends in a results.json: as the verdict of every check.
  std::map<std::string, Verdict> setup_failures;
  auto fail_all = [&](Status status, const std::string& why) {
    for (const auto& e : exercises) setup_failures.emplace(e, Verdict{status, why});
  };
  try {
    options.fixtures = ensure_fixtures();
  } catch (const Error& e) {
    fail_all(Status::kError, std::string("the grader could not make its fixtures: ") + e.what());
  }
  if (!f.submission.empty()) {
    submission = "submission " + fs::absolute(f.submission).string();
    try {
      const SubmissionBuild build = build_submission(f.submission, exercises, kSourceDir, kBuildDir);
      options.binaries.insert(build.binaries.begin(), build.binaries.end());
      for (const auto& [e, why] : build.failures) setup_failures.emplace(e, Verdict{Status::kBuildFailed, why});
    } catch (const Error& e) {
      fail_all(Status::kBuildFailed, e.what());
    }
  } else {
    for (const auto& e : exercises) options.binaries[e] = exercise_binary(e, f.solutions);
  }
  for (const auto& spec : f.use_binaries) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos) throw Error("--use-binary " + spec + ": write EXERCISE=PATH");
    selected_exercises(spec.substr(0, eq));
    options.binaries[spec.substr(0, eq)] = spec.substr(eq + 1);
    submission = "binaries given with --use-binary";
  }

  const nlohmann::json provenance = collect_provenance(kSourceDir, submission);
  fmt::print("grader: checking {} of {} (results in {})\n", fmt::join(exercises, ", "), submission,
             options.results_dir.string());
  std::fflush(stdout);
  Runner runner(options);
  std::vector<CheckOutcome> outcomes;
  const fs::path results_path = options.results_dir / "results.json";
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  for (const auto& e : exercises) {
    for (const CheckSpec* c : checks_of(e)) {
      if (!f.only.empty() && std::find(f.only.begin(), f.only.end(), c->id) == f.only.end()) continue;
      CheckOutcome outcome;
      if (auto it = setup_failures.find(e); it != setup_failures.end()) {
        outcome.spec = c;
        outcome.verdict = it->second;
      } else {
        outcome = run_check(*c, runner);
      }
      fmt::print("  {:<20} {:<16} {:5.1f} s\n", c->name(), status_name(outcome.verdict.status), outcome.seconds);
      std::fflush(stdout);
      outcomes.push_back(outcome);
      // After every check, so an interrupted grading still leaves what it found.
      write_gradescope(results_path, gradescope_json(outcomes, provenance, elapsed()));
    }
  }
  fmt::print("\n{}", format_table(outcomes));
  fmt::print("results: {}\n", results_path.string());
  for (const auto& o : outcomes) {
    if (o.verdict.status != Status::kPassed) return 1;
  }
  return 0;
}

// ---- grader run -------------------------------------------------------------------------------

struct RunFlags {
  std::string exercise;
  int world = 4;
  std::string hosts;
  bool solutions = false;
  bool print_commands = false;
  int port = 29500;
  std::string out = "out/run";
  double run_timeout = 3600;
  std::vector<std::string> extra;
};

bool mentions(const std::vector<std::string>& args, const std::string& flag) {
  for (const auto& a : args) {
    if (a == flag || a.rfind(flag + "=", 0) == 0) return true;
  }
  return false;
}

int run(const RunFlags& f) {
  selected_exercises(f.exercise);
  const bool distributed = f.exercise != "task1";
  LaunchSpec spec;
  spec.binary = fs::absolute(exercise_binary(f.exercise, f.solutions));
  spec.world_size = distributed ? f.world : 1;
  spec.port = f.port;
  spec.log_dir = fs::path(f.out) / f.exercise;
  spec.timeout_seconds = f.run_timeout;
  spec.echo_rank0 = true;
  if (!f.hosts.empty()) {
    std::string rest = f.hosts;
    for (size_t at; (at = rest.find(',')) != std::string::npos; rest = rest.substr(at + 1)) spec.hosts.push_back(rest.substr(0, at));
    spec.hosts.push_back(rest);
    spec.world_size = static_cast<int>(spec.hosts.size());
    spec.master = spec.hosts[0];
  }
  // The fixture and the demo's settings, unless the extra flags say otherwise.
  const fs::path fixtures = (f.print_commands ? kSourceDir / "fixtures" : ensure_fixtures());
  std::vector<std::pair<std::string, std::string>> defaults = {
      {"--model_name_or_path", (fixtures / "bert-tiny").string()}, {"--data_dir", (fixtures / "RTE").string()},
      {"--task_name", "RTE"}, {"--max_seq_length", "128"}, {"--learning_rate", "3e-4"},
      {"--output_dir", fs::absolute(fs::path(f.out) / f.exercise / "output").string()}};
  if (f.exercise != "task4") defaults.push_back({"--num_train_epochs", "1"});
  if (distributed && f.exercise != "task4") defaults.push_back({"--global_batch_size", "32"});
  if (!distributed) defaults.push_back({"--per_gpu_train_batch_size", "32"});
  for (const auto& [flag, value] : defaults) {
    if (!mentions(f.extra, flag)) spec.args.insert(spec.args.end(), {flag, value});
  }
  for (const char* flag : {"--do_train", "--do_eval", "--overwrite_output_dir"}) {
    if (f.exercise != "task4" && !mentions(f.extra, flag)) spec.args.push_back(flag);
  }
  if (f.exercise == "task4" && !mentions(f.extra, "--overwrite_output_dir")) spec.args.push_back("--overwrite_output_dir");
  spec.args.insert(spec.args.end(), f.extra.begin(), f.extra.end());
  std::vector<std::string> launch_args = spec.args;  // before the rank flags: the launchers' own
  if (distributed) {
    spec.args.insert(spec.args.end(), {"--master_ip", "{master}", "--master_port", "{port}", "--world_size",
                                       "{world}", "--local_rank", "{rank}"});
  }

  if (f.print_commands) {
    LaunchSpec local = spec;
    local.hosts.clear();
    fmt::print("# {} with {} rank(s). By hand, one command per rank (rank 0's host is the master):\n", f.exercise,
               spec.world_size);
    for (int r = 0; r < spec.world_size; ++r) {
      LaunchSpec one = local;
      one.master = spec.hosts.empty() ? "127.0.0.1" : spec.hosts[0];
      fmt::print("{}{}\n", spec.hosts.empty() ? "" : "# on " + spec.hosts[r] + ":\n", shell_join(rank_command(one, r, f.port)));
    }
    if (distributed) {
      std::vector<std::string> plain = {spec.binary.string()};
      plain.insert(plain.end(), launch_args.begin(), launch_args.end());
      const std::string master = spec.hosts.empty() ? "HOST0" : spec.hosts[0];
      fmt::print("\n# torchrun, on each of N hosts with P ranks each (node i of N):\n"
                 "torchrun --nnodes=N --nproc_per_node=P --node_rank=i --master_addr={} --master_port={} --no_python {}\n",
                 master, f.port, shell_join(plain));
      fmt::print("\n# Slurm (rank, world and master come from SLURM_PROCID, SLURM_NTASKS, MASTER_ADDR):\n"
                 "MASTER_ADDR={} MASTER_PORT={} srun --ntasks={} {}\n", master, f.port, spec.world_size, shell_join(plain));
      fmt::print("\n# Open MPI:\nmpirun -np {} -x MASTER_ADDR={} -x MASTER_PORT={} {}\n", spec.world_size, master, f.port,
                 shell_join(plain));
    }
    return 0;
  }
  fmt::print("grader: {} rank(s) of {}{}; logs in {}/rank<r>.log; rank 0 follows\n", spec.world_size,
             spec.binary.string(), spec.hosts.empty() ? " on this machine" : " over ssh", spec.log_dir.string());
  std::fflush(stdout);
  const LaunchResult result = launch_ranks(spec);
  if (const auto failure = diagnose(result, f.exercise)) {
    fmt::print(stderr, "\ngrader: {} ({})\n", failure->message, status_name(failure->status));
    return 1;
  }
  fmt::print("\ngrader: every rank finished in {:.1f} s; logs in {}\n", result.seconds, spec.log_dir.string());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return run_main("grader", [&]() -> int {
    CLI::App app{"dtlab grader: runs the exercises' ranks, checks the numbers that must hold, scores them "
                 "(Gradescope results.json) and renders the report.\n"
                 "Students: `make check-task2b`. Instructors: `grader check all --submission DIR`."};
    app.require_subcommand(1);

    auto* list = app.add_subcommand("list", "List the exercises and their checks, with points");

    CheckFlags cf;
    auto* check_cmd = app.add_subcommand("check", "Run the checks of one exercise (or all) and score them");
    check_cmd->add_option("exercise", cf.which, "task1, task2a, task2b, task3, task4 (commas for several) or all")
        ->required();
    check_cmd->add_option("--submission", cf.submission,
                          "Grade this folder (a student's tree, or a folder with task1/ ... task4/): built first");
    check_cmd->add_flag("--solutions", cf.solutions, "Grade the reference solutions (T-solution binaries)");
    check_cmd->add_option("--use-binary", cf.use_binaries, "EXERCISE=PATH: grade an already built binary");
    check_cmd->add_option("--only", cf.only, "Run only these checks (ids from `grader list`, comma-separated)")
        ->delimiter(',');
    check_cmd->add_option("--results", cf.results, "Folder for results.json and every run's logs")->capture_default_str();
    check_cmd->add_option("--timing-iterations", cf.timing_iterations,
                          "Iterations of the timing runs (first discarded)")->capture_default_str()->check(CLI::Range(2, 100000));
    check_cmd->add_option("--timeout", cf.timeout, "Seconds a rank waits in a collective (--timeout of the ranks)")
        ->capture_default_str()->check(CLI::PositiveNumber);
    check_cmd->add_option("--run-timeout", cf.run_timeout, "Seconds a run may take before its ranks are killed")
        ->capture_default_str()->check(CLI::PositiveNumber);
    check_cmd->add_option("--threads", cf.threads, "Threads per rank (0: the kit's default)")->capture_default_str();

    RunFlags rf;
    auto* run_cmd = app.add_subcommand("run", "Launch an exercise's ranks (here or over ssh) with per-rank logs");
    run_cmd->add_option("exercise", rf.exercise, "task1, task2a, task2b, task3 or task4")->required();
    run_cmd->add_option("--world-size", rf.world, "Ranks on this machine")->capture_default_str()->check(CLI::Range(1, 1024));
    run_cmd->add_option("--hosts", rf.hosts, "a,b,c,d: one rank per host over ssh (the same path on every host)");
    run_cmd->add_flag("--solutions", rf.solutions, "Run the reference solution");
    run_cmd->add_flag("--print-commands", rf.print_commands,
                      "Print the command of every rank, and torchrun / Slurm / mpirun lines; run nothing");
    run_cmd->add_option("--port", rf.port, "The master's port")->capture_default_str();
    run_cmd->add_option("--out", rf.out, "Folder for rank logs and outputs")->capture_default_str();
    run_cmd->add_option("--run-timeout", rf.run_timeout, "Seconds before the ranks are killed")->capture_default_str();
    run_cmd->add_option("extra", rf.extra, "Flags for the exercise binary, after --");

    ReportOptions ro;
    std::string results_dir = "out/grade";
    auto* report_cmd = app.add_subcommand("report", "Render the figures and the report from a results folder");
    report_cmd->add_option("--results", results_dir, "Folder `grader check` wrote")->capture_default_str();
    std::string report_out;
    report_cmd->add_option("--out", report_out, "Folder for the report (default RESULTS/report)");

    bool check_only = false;
    auto* skeletons_cmd = app.add_subcommand("skeletons", "Write tasks/ from solutions/ (instructors)");
    skeletons_cmd->add_flag("--check", check_only, "Write nothing; exit 1 when tasks/ is out of date");

    std::string release_out;
    auto* release_cmd = app.add_subcommand("release", "Write the student kit (no solutions) to a new folder");
    release_cmd->add_option("--out", release_out, "The new folder")->required();

    if (auto stop = parse_flags(app, argc, argv)) return *stop;

    if (*list) return list_checks();
    if (*check_cmd) return check(cf);
    if (*run_cmd) return run(rf);
    if (*report_cmd) {
      ro.results_dir = results_dir;
      ro.out_dir = report_out;
      ro.plots_dir = kSourceDir / "plots";
      const ReportSummary s = render_report(ro);
      for (const auto& note : s.notes) fmt::print("note: {}\n", note);
      for (const auto& fig : s.figures) fmt::print("figure: {}\n", fig.string());
      fmt::print("report: {}\n        {}\n", s.markdown.string(), s.html.string());
      return 0;
    }
    if (*skeletons_cmd) {
      if (!has_solutions()) throw Error("skeletons: no solutions/ here (a student release)");
      return write_skeletons(kSourceDir / "solutions", kSourceDir / "tasks", check_only);
    }
    if (*release_cmd) {
      const auto files = write_release(kSourceDir, release_out);
      fmt::print("wrote the student release to {} ({} files; no solutions/, no mutants)\n"
                 "  cd {} && ./scripts/setup.sh && make test     # then make check-task1 ...\n",
                 release_out, files.size(), release_out);
      return 0;
    }
    return 2;
  });
}
