// The runtime under a GPipe pipeline: one worker thread per stage that runs the forward and the
// backward of the (micro-batch, stage) tasks a driver hands it, and records when each ran. Not
// here: the schedule, splitting a model into stages or the driver's loop (the students' Pipe,
// CMU 11-868 hw4 problem 2); the driver submits every task of a clock tick, then collects them.
#pragma once

#include <ATen/ThreadLocalState.h>
#include <torch/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "dtlab/pipeline/schedule.h"
#include "dtlab/pipeline/timeline.h"

namespace dtlab::pipeline {

// A stage: its input -> its output, on `device`. A torch::nn::Sequential's forward, a lambda
// over GPT-2's forward_stage, or a test's sleeping lambda all fit. Called only from the stage's
// own worker thread, one call at a time.
using StageFunction = std::function<torch::Tensor(const torch::Tensor&)>;

struct Stage {
  StageFunction function;
  torch::Device device = torch::kCPU;
};

constexpr std::chrono::milliseconds kDefaultCollectTimeout{300'000};

struct StageWorkersOptions {
  // Intra-op threads each worker sets for itself (Note [Threads per stage]); 0:
  // default_threads_per_stage(stages).
  int threads_per_stage = 0;
  // How long collect() waits for a stage's result, and clear() for a task still running, before
  // it throws.
  std::chrono::milliseconds collect_timeout = kDefaultCollectTimeout;
};

// The caller's at::get_num_threads() (a driver's --threads; LibTorch's default is the physical
// cores) divided by the number of stages, at least 1: what each worker sets when
// StageWorkersOptions::threads_per_stage is 0, and what a driver prints.
int default_threads_per_stage(int stages);

// Note [Backward pipelining]: a stage's forward runs on an input detached from the previous
// stage's graph and made a leaf that requires grad, so every (micro-batch, stage) has its own
// small graph, which the worker keeps (the recorded input and output) until that task's
// backward. The backward task is torch::autograd::backward(output, gradient) ON THE WORKER, so
// the stages' backwards run at the same time on their threads exactly as their forwards do; it
// leaves the parameters' gradients in their .grad (adding up over micro-batches, as one backward
// over the whole batch would: scaling the loss is the caller's job) and the gradient with respect
// to the stage's input in the recorded input's .grad, which the driver hands to the previous
// stage. A parameter two stages share (GPT-2's tied embeddings) receives both stages'
// gradients from two threads: LibTorch 1.13's AccumulateGrad::apply takes a mutex of the
// parameter's AccumulateGrad node, of which there is one while any graph holds it
// (accumulate_grad.cpp, Note [Thread Safety on Autograd Node] in function.h), so the two
// additions cannot interleave. PipelineTransparency.SharedParameterGradientsFromTwoStageThreads
// AddUp and PipelineGpt2 check the sums.
//
// Note [Threads per stage]: each worker calls at::set_num_threads(threads_per_stage) on itself at
// start. With LibTorch's OpenMP backend (Debian's 1.13, libgomp) that is omp_set_num_threads,
// whose count belongs to the calling thread (libgomp keeps the nthreads ICV per thread), so
// LibTorch's kernels on a stage fork teams of that many threads and the driver keeps its own
// count (OpenBLAS 0.3.21's openmp build reads the caller's omp_get_max_threads too, by its
// source; not tested here). Two catches, both handled: LibTorch initialises a thread's count
// lazily on its first parallel op, to the last value ANY thread gave at::set_num_threads, which
// would undo an earlier setting, so the worker forces that initialisation first
// (at::get_num_threads()); and at::set_num_threads keeps its value as that default for threads
// not yet initialised, so the constructor initialises the calling thread before starting the
// workers. It also resizes LibTorch's one global pthreadpool (XNNPACK/QNNPACK's, not used by
// these float kernels). Also found: an at::parallel_for written in dtlab's (or a student's) code
// runs serially whatever the count: it is a header template, and nothing here compiles with
// -fopenmp; only LibTorch's own kernels fork. PipelineWorkers.ThreadsPerStageAreSetInsideEachStage
// counts the team a kernel runs on, with two runtimes of different counts.
//
// Threading contract: one driver thread calls submit, collect, clear and the destructor; the
// workers are internal. Every result is delivered through collect(stage), in the order its
// stage's tasks were submitted. Non-copyable, non-movable (the workers point into it).
class StageWorkers {
 public:
  // Starts one worker per stage and returns once every worker has set its thread count.
  // No stages, or a stage without a function, is a dtlab::Error.
  explicit StageWorkers(std::vector<Stage> stages, StageWorkersOptions options = {});
  // Stops every worker and joins it. Queued tasks are dropped; a task already running is waited
  // for (a stage call cannot be interrupted), so a stage that never returns would hang it.
  ~StageWorkers();
  StageWorkers(const StageWorkers&) = delete;
  StageWorkers& operator=(const StageWorkers&) = delete;

  int num_stages() const { return static_cast<int>(workers_.size()); }
  int threads_per_stage() const { return threads_per_stage_; }

  // Queues a task on stage task.stage and returns at once.
  // Forward: x is the stage's input for micro-batch task.micro. The worker moves it to the
  //   stage's device and detaches it; if grad mode was on HERE (grad mode is thread-local:
  //   captured now, applied on the worker) and x is floating point, the input requires grad.
  //   It runs the stage in that grad mode and, with grad mode on, records (input, output) for
  //   (micro, stage). The result is the output, detached (the next stage builds its own graph).
  // Backward: x is the gradient of the loss with respect to that task's output. The worker runs
  //   autograd backward from the recorded output (Note [Backward pipelining]), drops the record
  //   and returns the gradient with respect to the recorded input, on the stage's device
  //   (undefined when the input was not floating point, e.g. token ids). A backward whose
  //   forward was not recorded, or a gradient of the wrong shape, is an error of the task.
  // Errors of the task itself are reported by collect(); a stage out of range, a negative
  // micro-batch or an undefined x is a dtlab::Error here.
  void submit(Task task, Pass pass, torch::Tensor x);

  // The result of the oldest task submitted to `stage` and not yet collected, waiting up to
  // collect_timeout. If the task threw, rethrows it here as the same dtlab error class
  // (dtlab::Error for anything else) with "stage S, micro-batch M (pass): " before its message
  // (NotImplemented: after it, so it still starts with its TODO); the worker stays usable.
  // Nothing to collect, or the timeout, is a dtlab::Error naming the stage, micro-batch and
  // timeout; after a timeout the task stays pending (collect again, or clear()).
  torch::Tensor collect(int stage);

  // Starts a new step: drops every queued task, uncollected result and recorded activation,
  // waits for a task still running to finish (its result is discarded), and empties the
  // timeline. Call between steps and after an error: once it returns, no task of the old step
  // runs, so no backward of it adds to a .grad the caller then zeroes and no forward reads a
  // parameter the optimiser then writes. A task still running after collect_timeout (a stage
  // call cannot be interrupted) is a dtlab::Error naming it; the rest is dropped all the same,
  // and clear() may be called again.
  void clear();

  // Events since the step began (the first submit after construction or clear()).
  const Timeline& timeline() const { return timeline_; }
  // Micro-batches whose activations the stage holds (forward recorded, backward not yet run),
  // and their bytes: the recorded input and output tensors (numel x element size; not what
  // autograd saved inside the stage, and an input shares storage with the previous stage's
  // output).
  int recorded(int stage) const;
  int64_t live_bytes(int stage) const;

 private:
  struct Job {
    Task task;
    Pass pass = Pass::kForward;
    torch::Tensor x;
    bool grad_enabled = false;
    uint64_t epoch = 0;
    std::chrono::steady_clock::time_point origin;
    // The submitter's thread-local state (grad mode, the profiler's recording, ...), which the
    // worker takes on while it runs the job.
    at::ThreadLocalState submitter;
  };
  struct Result {
    Task task;
    Pass pass = Pass::kForward;
    torch::Tensor value;
    std::exception_ptr error;
  };
  struct Record {
    torch::Tensor input, output;
    int64_t bytes = 0;
  };
  // One stage's thread and queues. Everything below `thread` is guarded by `mutex`.
  struct Worker {
    Stage stage;
    std::thread thread;
    std::mutex mutex;
    std::condition_variable work_ready, result_ready;
    std::deque<Job> in;                             // submitted, not started
    std::deque<Result> out;                         // finished, not collected
    std::deque<std::pair<Task, Pass>> uncollected;  // submitted, not collected, oldest first
    std::map<int, Record> records;                  // by micro-batch
    int64_t live_bytes = 0;
    uint64_t epoch = 0;  // bumped by clear(): results of older jobs are discarded
    std::optional<std::pair<Task, Pass>> running;   // the job the worker runs now
    std::condition_variable idle;                   // signalled when `running` empties
    bool started = false, stop = false;
  };

  void run(int stage);
  // Runs one task on the worker of `stage`; `held` is the record the forward makes or the
  // backward consumes. Never throws: a failure is the result's error.
  Result execute(int stage, Job& job, std::optional<Record>& held, bool already_recorded);
  void stop_all();

  StageWorkersOptions options_;
  int threads_per_stage_;
  std::vector<std::unique_ptr<Worker>> workers_;
  Timeline timeline_;
  std::optional<std::chrono::steady_clock::time_point> origin_;  // the driver's, set by submit
};

}  // namespace dtlab::pipeline
