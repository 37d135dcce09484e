// How a check ends. A crash, a hang, a TODO not done and a wrong number are different things to
// a student, so they are different statuses with their own wording.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launch.h"

namespace dtlab::grader {

enum class Status {
  kPassed,
  kWrongNumber,     // the run finished; a number it produced is not what must hold
  kNotImplemented,  // a rank stopped at a TODO (exit code 3)
  kCrash,           // a rank died by a signal or an internal error (exit code 1)
  kHang,            // a rank was still running at its deadline and was killed
  kError,           // a rank stopped with a usage or distributed error (exit code 2 or 4)
  kDesync,          // the ranks called different collectives (exit code 5, --distributed_debug)
  kDeadlock,        // the ranks waited for each other: a schedule that cannot finish, or every
                    // rank timed out together in send/recv (Note [Who stopped])
  kBuildFailed,     // the submission did not compile
  kNotSubmitted,    // the submission has no folder for the exercise: nothing was built or run
};

// "passed", "wrong number", "not implemented", "crash", "hang", "error", "ranks disagree",
// "deadlock", "build failed", "not submitted".
const char* status_name(Status status);

struct Verdict {
  Status status = Status::kPassed;
  std::string message;  // what is wrong, in words a student can act on
};

// The words of the kit's distributed error when every rank waited for another until its
// operation timed out (common/src/dist/heartbeat.cpp, Note [Who stopped]); a run whose every
// rank says them is a deadlock.
inline constexpr const char* kDeadlockWords = "no rank can go on: a deadlock";

// What the grader has of a run beside how its ranks ended.
struct RunEvidence {
  // Each rank's last heartbeat (Note [A run that stalls], launch.cpp), by rank; empty or nullopt
  // where there is none (a single-process run, a rank that never reached the rendezvous).
  std::vector<std::optional<RankBeat>> beats;
  // Name each rank's log file by its path: for `grader run`, whose user has the files. A grade's
  // feedback does not (a student on Gradescope cannot open a path on the grading machine): it
  // quotes what the logs say instead.
  bool log_paths = false;
};

// Why a launch failed, or nullopt when every rank exited 0. `what` names the run ("task2b at 4
// ranks"). The message quotes the deciding rank's own words; for a hang it says where every rank
// that was killed was (step and operation, from its heartbeat).
std::optional<Verdict> diagnose(const LaunchResult& launch, const std::string& what, const RunEvidence& evidence = {});

}  // namespace dtlab::grader
