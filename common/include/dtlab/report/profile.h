// Where a training step's time goes: LibTorch's autograd profiler around a few steps, written
// where a student can read it (handouts/task1.md, "Where the time goes"):
//   trace.json   every operator of every profiled step as a box on its thread's row, in Chrome's
//                trace format (open it in https://ui.perfetto.dev or chrome://tracing);
//   profile.txt  the operators that took the most time themselves (self time: their own, less
//                the operators they called), per step, for each phase of the step.
// Debian's LibTorch 1.13 is built without Kineto, so this is the legacy CPU profiler: it records
// the RecordFunction events of the thread that starts it and of every thread that inherits that
// thread's state (the autograd engine, at::launch tasks, the pipeline's stage workers).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dtlab::report {

// The phase of a step an operator ran in, from the scopes around it: an autograd node's backward
// function means backward; the kit's update scope (clipping, the optimiser, the schedule, zero_grad:
// kUpdateScope) means update; the rest is forward (the loss included).
enum class Phase { forward, backward, update };

// The update phase's scope (RECORD_USER_SCOPE) around clipping, the optimiser, the schedule and
// zero_grad; a scope whose name starts with it counts as update too.
inline constexpr const char* kUpdateScope = "dtlab::update";
const char* phase_name(Phase phase);

// One profiled range: an operator or a scope, on one thread, in microseconds.
struct ProfiledRange {
  std::string name;
  uint64_t thread = 0;    // LibTorch's thread id
  double start_us = 0;
  double end_us = 0;
  bool backward_function = false;  // an autograd node (RecordScope::BACKWARD_FUNCTION)
  bool user_scope = false;         // a RECORD_USER_SCOPE (the kit's phases)
  bool async = false;  // ended on another thread (a collective): in the trace, not in the table
};

// What the table shows of one operator in one phase, summed over the profiled steps.
struct OperatorTime {
  std::string name;
  Phase phase = Phase::forward;
  int64_t calls = 0;
  double self_us = 0;   // inside it, not inside the ranges it opened
  double total_us = 0;  // inside it, children included
};

// Self and total time of every name by phase: ranges nest by time on each thread (a range that
// starts inside another and ends inside it is its child). Sorted by self time, largest first.
// Scopes (backward functions, user scopes) are not operators and are left out of the table,
// but their children are counted in the phase the scopes say.
std::vector<OperatorTime> operator_times(const std::vector<ProfiledRange>& ranges);

// profile.txt: per phase, its share of the profiled time and its top operators by self time,
// per step; `what` says what was profiled (for example "steps 2-4 of task1").
std::string format_operator_table(const std::vector<OperatorTime>& times, int64_t steps,
                                  const std::string& what, size_t top = 15);

// trace.json in Chrome's trace format ("X" events, one row per thread, timestamps from the
// first range), written to a temporary name and renamed.
void write_chrome_trace(const std::filesystem::path& path, const std::vector<ProfiledRange>& ranges,
                        const std::string& process_name);

// Records the profiler over a window of steps of a training loop and writes trace.json and
// profile.txt into a folder when the window closes. Inactive (both calls do nothing) when
// steps is 0.
class StepProfiler {
 public:
  // Records steps first_step .. first_step + steps - 1 (from 1).
  StepProfiler(std::filesystem::path dir, std::string what, int64_t first_step, int64_t steps);
  ~StepProfiler();  // stops a window the run did not reach the end of, writing what it has
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  void before_step(int64_t step);
  bool after_step(int64_t step);  // true when this step closed the window and the files are written
  bool written() const { return written_; }
  // The run is over: writes a window it did not reach the end of. Returns the line to print for
  // a profile that was asked for and did not close in after_step (what was written, or that the
  // run ended before the window), "" otherwise.
  std::string close();

 private:
  void finish();
  std::filesystem::path dir_;
  std::string what_;
  int64_t first_step_, steps_, recorded_ = 0;
  bool recording_ = false, written_ = false;
};

// The default window of --profile: steps 2 to 4 (the first step allocates and warms up).
constexpr int64_t kProfileFirstStep = 2;
constexpr int64_t kProfileSteps = 3;

// The --profile flag's help, for every driver.
inline constexpr const char* kProfileFlagHelp =
    "Record LibTorch's profiler over steps 2-4 (rank 0) into the output folder: trace.json (Perfetto, "
    "chrome://tracing) and profile.txt (top operators by self time, per phase)";

}  // namespace dtlab::report
