// grader: launches the ranks of an exercise, checks what docs/DESIGN.md says must hold, scores it
// for Gradescope, renders the report, and writes the skeletons and the student release. This file
// is the command line; each subcommand lives in its own file (commands.h).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <exception>
#include <string>

#include "commands.h"
#include "exercises.h"
#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/tooling/skeleton.h"
#include "dtlab/train/runtime.h"
#if DTLAB_HAS_RELEASE
#include "release.h"
#endif
#include "report.h"
#include "runs.h"

using namespace dtlab;
using namespace dtlab::grader;

namespace {

// Seconds above 0, in words (CLI11's PositiveNumber says "Value 0 not in range 0.000000 to
// 1.797...e308").
const CLI::Validator kSeconds(
    [](std::string& text) -> std::string {
      try {
        size_t used = 0;
        if (std::stod(text, &used) > 0 && used == text.size()) return "";
      } catch (const std::exception&) {
      }
      return "must be a number of seconds above 0, not " + text;
    },
    "SECONDS");

}  // namespace

int main(int argc, char** argv) {
  // The grader's own tensor work (comparing the runs' dumps) is small and runs beside the ranks it
  // grades: one thread, so that no OpenMP team of all the cores spins between its kernels (1% of a
  // test pass's CPU on 2.15 before).
  dtlab::train::configure_threads(1);
  return run_main("grader", [&]() -> int {
    CLI::App app{"dtlab grader: runs the exercises' ranks, checks the numbers that must hold, scores them "
                 "(Gradescope results.json) and renders the report.\n"
                 "Students: `make check-task2b`. Instructors: `grader check all --submission DIR`."};
    app.require_subcommand(1);

    auto* list = app.add_subcommand("list", "List the exercises and their checks, with points");

    CheckFlags cf;
    auto* check_cmd = app.add_subcommand("check", "Run the checks of one exercise (or all) and score them");
    check_cmd->add_option("exercise", cf.which, exercise_list() + " (commas for several) or all")
        ->required();
    check_cmd->add_option("--submission", cf.submission,
                          "Grade this folder (a student's tree, or a folder with one folder per exercise): built first");
    check_cmd->add_flag("--solutions", cf.solutions, "Grade the reference solutions (T-solution binaries)");
    check_cmd->add_option("--use-binary", cf.use_binaries, "EXERCISE=PATH: grade an already built binary");
    check_cmd->add_option("--only", cf.only,
                          fmt::format("Run only these checks (ids from `grader list`, comma-separated): a partial "
                                      "grading, written to RESULTS/{}/ so that RESULTS/results.json keeps the last "
                                      "full one; a run the chosen checks share with others trains only the steps they read", kPartialFolder))
        ->delimiter(',');
    check_cmd->add_option("--results", cf.results,
                          fmt::format("Folder RESULTS for results.json and every run's logs (with --only: RESULTS/{}/)",
                                      kPartialFolder))
        ->capture_default_str();
    check_cmd->add_option("--timing-iterations", cf.timing_iterations,
                          "Iterations of the timing runs (first discarded)")->capture_default_str()->check(CLI::Range(2, 100000));
    check_cmd->add_option("--timeout", cf.timeout,
                          fmt::format("Seconds a rank waits in a collective (--timeout of the ranks); once a rank "
                                      "has failed, the others get --timeout + {:g} s to stop before they count as hung",
                                      kFailureGraceSeconds))
        ->capture_default_str()->check(kSeconds);
    check_cmd->add_option("--run-timeout", cf.run_timeout,
                          fmt::format("Seconds a run may take before its ranks are killed (a distributed run in which "
                                      "no rank makes progress is stopped sooner: after the longer of --timeout + {:g} s, "
                                      "at least {:g} s, and {:g} times its longest pause)",
                                      kFailureGraceSeconds, kStallFloorSeconds, kStallFactor))
        ->capture_default_str()->check(kSeconds);
    check_cmd->add_flag("--keep-runs", cf.keep_runs,
                        "Keep every file the runs wrote (the tensor dumps the checks compared, ...); by default a "
                        "grading keeps what its feedback and the report read: run.json, the rank logs and heartbeats, "
                        "output/results.json");
    check_cmd->add_option("--reference-cache", cf.reference_cache,
                          "Folder that keeps the kit's reference runs between gradings (a class graded one "
                          "submission after another: each made once); default: $DTLAB_REFERENCE_CACHE, else none");
    check_cmd->add_option("--threads", cf.threads, "Threads per rank (0: the kit's default)")->capture_default_str();
    check_cmd->add_option("--backend", cf.backend, "Collective backend of the ranks: gloo (CPU) or nccl (a GPU per rank)")
        ->capture_default_str()->check(CLI::IsMember({"gloo", "nccl"}));
    check_cmd->add_option("--sandbox", cf.sandbox,
                          "Where student code runs (docs/GRADING.md): auto, bwrap (bubblewrap), user (a separate uid, "
                          "as root) or none (no isolation)")
        ->capture_default_str()->check(CLI::IsMember({"auto", "bwrap", "user", "none"}));

    RunFlags rf;
    auto* run_cmd = app.add_subcommand("run", "Launch an exercise's ranks (here or over ssh) with per-rank logs");
    run_cmd->add_option("exercise", rf.exercise, "One of " + exercise_list())->required();
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

#if DTLAB_HAS_RELEASE
    std::string release_out;
    auto* release_cmd = app.add_subcommand("release", "Write the student kit (no solutions) to a new folder");
    release_cmd->add_option("--out", release_out, "The new folder")->required();
#endif

    if (auto stop = parse_flags(app, argc, argv)) return *stop;

    if (*list) return list_command();
    if (*check_cmd) return check_command(cf);
    if (*run_cmd) return run_command(rf);
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
#if DTLAB_HAS_RELEASE
    if (*release_cmd) {
      const auto files = write_release(kSourceDir, release_out);
      fmt::print("wrote the student release to {} ({} files; no solutions/, no mutants, no answers; its commit in "
                 "release.json)\n"
                 "  cd {} && ./scripts/setup.sh && make check-task1     # the students' first command (its README)\n",
                 release_out, files.size(), release_out);
      return 0;
    }
#endif
    return 2;
  });
}
