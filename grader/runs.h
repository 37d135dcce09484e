// The runs the checks look at: one exercise binary at one world size with one set of flags,
// launched inside the sandbox (sandbox.h) whose scratch folder comes back into RESULTS/runs/<id>/
// (rank logs, output/results.json, dump/, and run.json, written by the grader). A run is made once
// and shared by every check that reads it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "exercises.h"
#include "launch.h"
#include "outcome.h"
#include "sandbox.h"

namespace dtlab::grader {

// Once a rank of a run has failed, the others get the collective timeout (--timeout) plus this
// long to stop by themselves (they notice at their next collective, or when it times out) before
// they count as hung and are killed. The instructors' guide (docs/instructors/README.md) and
// `grader check --help` state this number; grader_docs_test holds them to it.
inline constexpr double kFailureGraceSeconds = 5;

// Note [A run that stalls] (launch.cpp): a distributed run in which no rank starts a step or an
// operation for max(stall_floor_seconds(--timeout), kStallFactor x the run's longest pause so far)
// is stopped as a hang, long before --run-timeout. The floor is at least the collective timeout
// plus the grace, so that a rank waiting in a collective times out by itself first (with the
// kit's own words on who stopped), and never under kStallFloorSeconds. The instructors' guide
// (docs/instructors/README.md) states these numbers; grader_docs_test holds it to them.
inline constexpr double kStallFloorSeconds = 20;
inline constexpr double kStallFactor = 4;
double stall_floor_seconds(double collective_timeout);
// Where each rank writes its heartbeat (--beat_file) in its scratch folder: logs/ comes back
// beside the rank logs, as RESULTS/runs/<id>/rank<r>.beat.
inline constexpr const char* kBeatFile = "{scratch}/logs/rank{rank}.beat";

struct GradeOptions {
  std::filesystem::path fixtures;     // bert-tiny/, RTE/, gpt2-tiny/ and translation/
  std::filesystem::path results_dir;  // where runs/ and results.json go
  // exercise -> binary; "reference" is the kit's own single-process run (dtlab-reference).
  std::map<std::string, std::filesystem::path> binaries;
  int timing_iterations = 40;         // docs/DESIGN.md: 40 iterations, the first discarded
  double collective_timeout = 30;     // --timeout of every rank
  double run_timeout = 300;           // a whole run, then its ranks are killed
  int threads = 0;                    // --threads of every rank (0: the kit's default)
  std::string backend = "gloo";       // --backend of every rank of a distributed run
  Sandbox sandbox;                    // where every run starts (Note [The sandbox])
  // The ids of the checks this grading runs (`--only`); empty: every check. Note [A run as long
  // as its checks].
  std::vector<std::string> only;
  // Note [A reference run made once] (reference_cache.h): where the kit's reference runs are kept
  // between gradings; empty: made anew in each.
  std::filesystem::path reference_cache;
};

// One run of the checks: BERT on the RTE fixture or GPT-2 on the translation fixture (by the
// exercise, trains_gpt2), seed 42 unless the flags say otherwise.
struct RunRequest {
  std::string id;        // folder name under runs/
  std::string exercise;  // a key of GradeOptions::binaries
  std::string purpose;   // what the run is for: "losses", "timing", ... (the report reads it)
  int world = 1;
  std::vector<std::string> flags;  // added to the common ones
  bool dump = false;               // --dump_dir runs/<id>/dump (step 1)
};

struct Run {
  std::string id;
  std::filesystem::path dir;
  LaunchResult launch;
  std::optional<Verdict> failure;  // how the launch failed, if it did
  std::vector<std::string> left_out;  // files of the run the sandbox did not bring back, and why
  double sandbox_seconds = 0;         // the whole run, sandbox included
  nlohmann::json results;          // rank 0's results.json, null when missing
  std::filesystem::path dump_dir;
  std::string from_cache;  // the reference cache's key it was read from; empty: made now
};

class Runner {
 public:
  explicit Runner(GradeOptions options);
  const GradeOptions& options() const { return options_; }
  bool has_binary(const std::string& exercise) const { return options_.binaries.count(exercise) > 0; }
  // Whether this grading runs the check of this id (every check unless `--only` names some).
  bool grades(const std::string& check_id) const;
  // Runs the request (once per id) and returns it; never throws for what the ranks do.
  const Run& run(const RunRequest& request);

 private:
  GradeOptions options_;
  std::map<std::string, Run> done_;
};

// Note [What a grading keeps]: a run brings back everything its ranks wrote; after the checks,
// the grading needs only what its feedback and the report read: run.json, the rank logs and
// heartbeats (rank<r>.log, rank<r>.beat), sandbox.log and output/results.json. The rest (the
// tensor dumps the checks compared, other outputs) is removed from every RESULTS/runs/<id>/
// unless `grader check --keep-runs`. Returns the bytes removed.
uint64_t prune_runs(const std::filesystem::path& runs);

// Whether the ranks of a run with this purpose check every collective against each other
// (--distributed_debug, Note [Desync detection] in dist/group.h): all but the runs whose time or
// bytes are measured ("timing", "traffic", "bucket-sweep") or that train for long ("learning"):
// the check costs a small all_gather per collective and its bytes would count as traffic.
bool checks_collectives(const std::string& purpose);

// "task2b at 4 ranks" / "task1".
std::string describe(const RunRequest& request);

}  // namespace dtlab::grader
