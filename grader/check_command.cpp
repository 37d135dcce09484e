// grader check: runs the checks of the chosen exercises, prints the table and writes Gradescope's
// results.json after every check.
#include <fmt/format.h>
#include <sys/stat.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>

#include "checks.h"
#include "commands.h"
#include "dtlab/core/device.h"
#include "dtlab/core/error.h"
#include "folder_lock.h"
#include "gradescope.h"
#include "provenance.h"
#include "sandbox.h"
#include "submission.h"

namespace fs = std::filesystem;

namespace dtlab::grader {


int check_command(const CheckFlags& f) {
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
  const fs::path results_root = fs::absolute(f.results);  // runs name files in it from inside their sandbox
  options.results_dir = f.only.empty() ? results_root : results_root / kPartialFolder;  // Note [Partial gradings]
  options.timing_iterations = f.timing_iterations;
  options.collective_timeout = f.timeout;
  options.run_timeout = f.run_timeout;
  options.threads = f.threads;
  options.backend = f.backend;
  options.only = f.only;
  if (!f.reference_cache.empty()) {
    options.reference_cache = fs::absolute(f.reference_cache);
  } else if (const char* cache = std::getenv("DTLAB_REFERENCE_CACHE"); cache && *cache) {
    options.reference_cache = fs::absolute(cache);
  }
  // No GPU, or a build without CUDA: one line now, not a failed run per check later.
  if (f.backend == "nccl") require_cuda(cuda_availability(), "--backend nccl", "grade with --backend gloo here");
  options.sandbox = choose_sandbox(f.sandbox, kBuildDir / "grader" / "dtlab-sandbox-launcher");
  // CUDA reserves far more than it uses; so do the sanitizers (Note [Sanitized builds]).
  options.sandbox.limit_address_space = f.backend != "nccl" && !kSanitizedBuild;
  if (options.sandbox.mode == SandboxMode::kUser) {
    if (!f.submission.empty()) {
      const std::vector<fs::path> readable = answers_readable_by_sandbox(options.sandbox, kSourceDir, kBuildDir);
      if (!readable.empty()) {
        std::string list;
        for (size_t i = 0; i < readable.size() && i < 5; ++i) list += "\n  " + readable[i].string();
        if (readable.size() > 5) list += fmt::format("\n  and {} more", readable.size() - 5);
        throw Error(fmt::format(
            "--sandbox user: the sandbox's uid ({}) can read the kit's answers, which a submission could #include "
            "or run:{}\nMake them the grader's alone (`chmod -R go-rwx {}/solutions {}/tests/mutants {}/tests "
            "{}/bench {}/*-solution`), grade from a student release plus the grader (no answers), or grade where "
            "bubblewrap can start (--sandbox bwrap)",
            options.sandbox.uid, list, kSourceDir.string(), kSourceDir.string(), kBuildDir.string(),
            kBuildDir.string(), kBuildDir.string()));
      }
    }
  }
  options.binaries[kReference] = kBuildDir / "grader" / "dtlab-reference";
  options.binaries[kReferenceGpt2] = kBuildDir / "tools" / "dtlab-gpt2";

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
  SubmissionBuild submission_build;  // its binaries' folder lasts as long as the grading
  if (!f.submission.empty()) {
    submission = "submission " + fs::absolute(f.submission).string();
    try {
      // Before the build: a configure that fails must not turn a missing folder into a failed build.
      for (const auto& [e, why] : missing_exercises(f.submission, exercises)) {
        setup_failures.emplace(e, Verdict{Status::kNotSubmitted, why});
      }
      submission_build = build_submission(f.submission, exercises, kSourceDir, kBuildDir, options.sandbox);
      options.binaries.insert(submission_build.binaries.begin(), submission_build.binaries.end());
      for (const auto& [e, why] : submission_build.failures) setup_failures.emplace(e, Verdict{Status::kBuildFailed, why});
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

  // What was graded, hashed (Note [Release identity]): the submission's folder, tasks/ or solutions/.
  fs::path sources = f.solutions ? kSourceDir / "solutions" : kSourceDir / "tasks";
  if (!f.submission.empty()) {
    // A submission that is no folder already failed every check above, with its reason.
    sources = fs::is_directory(f.submission) ? fs::absolute(submission_tasks_root(f.submission)) : fs::path();
  }
  if (!f.use_binaries.empty()) sources.clear();  // binaries: no sources to name
  nlohmann::json provenance = collect_provenance(kSourceDir, submission, f.backend, sources);
  provenance["sandbox"] = sandbox_mode_name(options.sandbox.mode) +
                          (options.sandbox.note.empty() ? "" : " (" + options.sandbox.note + ")");
  fmt::print("grader: checking {} of {} (results in {})\n", fmt::join(exercises, ", "), submission,
             options.results_dir.string());
  if (!options.reference_cache.empty()) {  // Note [A reference run made once]: said, not silent
    fmt::print("grader: the kit's reference runs are read from and kept in {} (each run.json names its key)\n",
               options.reference_cache.string());
  }
  std::fflush(stdout);
  if (options.sandbox.mode == SandboxMode::kUser) {
    // User mode hides files by their permissions only: what the grader writes from here on (the
    // reference runs' results and dumps, training orders) is the grader's alone, as each run's
    // scratch folder is its uid's alone (Note [The sandbox]). After the fixtures, which every
    // run reads.
    ::umask(077);
  }
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
      fmt::print("  {:<22} {:<16} {:5.1f} s\n", c->name(), status_name(outcome.verdict.status), outcome.seconds);
      std::fflush(stdout);
      outcomes.push_back(outcome);
      // After every check, so an interrupted grading still leaves what it found.
      write_gradescope(results_path, gradescope_json(outcomes, provenance, elapsed()));
    }
  }
  if (!f.keep_runs) {  // Note [What a grading keeps]
    const uint64_t removed = prune_runs(options.results_dir / "runs");
    if (removed > 0) {
      fmt::print("runs: removed {:.1f} MB the checks no longer need (tensor dumps, other outputs; --keep-runs keeps "
                 "them)\n", removed / 1e6);
    }
  }
  fmt::print("\n{}", format_table(outcomes, provenance));
  fmt::print("results: {}\n", results_path.string());
  if (!f.only.empty() && fs::exists(results_root / "results.json")) {
    fmt::print("         (--only: a partial grading; {} still holds the last full one)\n",
               (results_root / "results.json").string());
  }
  for (const auto& o : outcomes) {
    if (o.verdict.status != Status::kPassed) return 1;
  }
  return 0;
}

}  // namespace dtlab::grader
