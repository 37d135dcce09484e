// How a check ends. A crash, a hang, a TODO not done and a wrong number are different things to
// a student, so they are different statuses with their own wording.
#pragma once

#include <optional>
#include <string>

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
  kBuildFailed,     // the submission did not compile
  kNotSubmitted,    // the submission has no folder for the exercise: nothing was built or run
};

// "passed", "wrong number", "not implemented", "crash", "hang", "error", "ranks disagree",
// "build failed", "not submitted".
const char* status_name(Status status);

struct Verdict {
  Status status = Status::kPassed;
  std::string message;  // what is wrong, in words a student can act on
};

// Why a launch failed, or nullopt when every rank exited 0. `what` names the run ("task2b at 4
// ranks"). The message quotes the deciding rank's own words and names its log.
std::optional<Verdict> diagnose(const LaunchResult& launch, const std::string& what);

}  // namespace dtlab::grader
