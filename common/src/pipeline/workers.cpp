// The stage worker threads of the pipeline runtime, see pipeline/workers.h.
#include "dtlab/pipeline/workers.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <fmt/core.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <sstream>

#include "dtlab/core/device.h"
#include "dtlab/core/error.h"

namespace dtlab::pipeline {

namespace workers_detail {

// How long the constructor waits for a new thread to start: far more than it ever takes.
constexpr std::chrono::seconds kStartTimeout{60};

int64_t bytes_of(const torch::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

std::string shape_of(const torch::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}

std::string context_of(int stage, const Task& task, Pass pass) {
  return fmt::format("stage {}, micro-batch {} ({})", stage, task.micro, pass_name(pass));
}

// The exception a task threw, as collect() rethrows it: the same dtlab class with the task
// named, anything else as a dtlab::Error.
std::exception_ptr with_context(const std::string& context) {
  try {
    throw;
  } catch (const NotImplemented& e) {
    return std::make_exception_ptr(NotImplemented(fmt::format("{} (in {})", e.what(), context)));
  } catch (const DesyncError& e) {
    return std::make_exception_ptr(DesyncError(context + ": " + e.what()));
  } catch (const DistError& e) {
    return std::make_exception_ptr(DistError(context + ": " + e.what()));
  } catch (const Error& e) {
    return std::make_exception_ptr(Error(context + ": " + e.what()));
  } catch (const c10::Error& e) {
    return std::make_exception_ptr(Error(context + ": " + e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return std::make_exception_ptr(Error(context + ": " + e.what()));
  } catch (...) {
    return std::make_exception_ptr(Error(context + ": an exception that is not a std::exception"));
  }
}

}  // namespace workers_detail

StageWorkers::StageWorkers(std::vector<Stage> stages, StageWorkersOptions options)
    : options_(std::move(options)), timeline_(static_cast<int>(stages.size())) {
  if (stages.empty()) throw Error("a pipeline needs at least one stage");
  for (size_t s = 0; s < stages.size(); ++s) {
    if (!stages[s].function) throw Error(fmt::format("stage {} has no function", s));
  }
  if (options_.threads_per_stage < 0) {
    throw Error(fmt::format("threads_per_stage is {}: give a positive count, or 0 for cores / stages",
                            options_.threads_per_stage));
  }
  if (options_.collect_timeout.count() <= 0) {
    throw Error(fmt::format("collect_timeout is {} ms: it must be positive", options_.collect_timeout.count()));
  }
  // Note [Threads per stage]: the caller's own count is fixed before any worker sets one, and
  // is the budget the stages share.
  threads_per_stage_ = options_.threads_per_stage > 0 ? options_.threads_per_stage
                                                       : default_threads_per_stage(static_cast<int>(stages.size()));
  for (Stage& stage : stages) {
    workers_.push_back(std::make_unique<Worker>());
    workers_.back()->stage = std::move(stage);
  }
  try {
    for (int s = 0; s < num_stages(); ++s) workers_[s]->thread = std::thread([this, s] { run(s); });
    for (int s = 0; s < num_stages(); ++s) {
      Worker& w = *workers_[s];
      std::unique_lock<std::mutex> lock(w.mutex);
      if (!w.result_ready.wait_for(lock, workers_detail::kStartTimeout, [&] { return w.started; })) {
        throw Error(fmt::format("the worker thread of stage {} did not start within {} s", s,
                                workers_detail::kStartTimeout.count()));
      }
    }
  } catch (...) {
    stop_all();
    throw;
  }
}

int default_threads_per_stage(int stages) { return std::max(1, at::get_num_threads() / std::max(stages, 1)); }

StageWorkers::~StageWorkers() { stop_all(); }

void StageWorkers::stop_all() {
  for (auto& w : workers_) {
    {
      std::lock_guard<std::mutex> lock(w->mutex);
      w->stop = true;
    }
    w->work_ready.notify_all();
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

void StageWorkers::submit(Task task, Pass pass, torch::Tensor x) {
  if (task.stage < 0 || task.stage >= num_stages()) {
    throw Error(fmt::format("submit: task {} names a stage that does not exist: there are {} stages, 0..{}",
                            describe(task), num_stages(), num_stages() - 1));
  }
  if (task.micro < 0) throw Error(fmt::format("submit: task {} has a negative micro-batch", describe(task)));
  if (!x.defined()) {
    throw Error(fmt::format("submit: the {} input of task {} is an undefined tensor", pass_name(pass),
                            describe(task)));
  }
  if (!origin_) origin_ = std::chrono::steady_clock::now();
  Job job{task, pass, std::move(x), at::GradMode::is_enabled(), 0, *origin_, at::ThreadLocalState()};
  Worker& w = *workers_[task.stage];
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    job.epoch = w.epoch;
    w.in.push_back(std::move(job));
    w.uncollected.emplace_back(task, pass);
  }
  w.work_ready.notify_one();
}

torch::Tensor StageWorkers::collect(int stage) {
  if (stage < 0 || stage >= num_stages()) {
    throw Error(fmt::format("collect: stage {} does not exist: there are {} stages, 0..{}", stage, num_stages(),
                            num_stages() - 1));
  }
  Worker& w = *workers_[stage];
  std::unique_lock<std::mutex> lock(w.mutex);
  if (w.uncollected.empty()) {
    throw Error(fmt::format("collect: stage {} has no task to collect: every task submitted to it was collected "
                            "or dropped by clear()",
                            stage));
  }
  const auto [task, pass] = w.uncollected.front();
  if (!w.result_ready.wait_for(lock, options_.collect_timeout, [&] { return !w.out.empty(); })) {
    throw Error(fmt::format("{}: no result after {} ms (StageWorkersOptions::collect_timeout): the stage is stuck "
                            "or slower than that",
                            workers_detail::context_of(stage, task, pass), options_.collect_timeout.count()));
  }
  Result result = std::move(w.out.front());
  w.out.pop_front();
  w.uncollected.pop_front();
  lock.unlock();
  if (result.task != task || result.pass != pass) {  // the queues are FIFO: a bug if this fires
    throw Error(fmt::format("internal error: stage {} returned {} where {} was expected", stage,
                            describe(result.task), describe(task)));
  }
  if (result.error) std::rethrow_exception(result.error);
  return std::move(result.value);
}

void StageWorkers::clear() {
  for (auto& w : workers_) {
    std::lock_guard<std::mutex> lock(w->mutex);
    ++w->epoch;
    w->in.clear();
    w->out.clear();
    w->uncollected.clear();
    w->records.clear();
    w->live_bytes = 0;
  }
  // Nothing new starts now; wait for what already runs (a backward still accumulating into
  // .grad, a forward still reading parameters), all stages against one deadline.
  const auto deadline = std::chrono::steady_clock::now() + options_.collect_timeout;
  std::string still_running;
  for (int s = 0; s < num_stages(); ++s) {
    Worker& w = *workers_[s];
    std::unique_lock<std::mutex> lock(w.mutex);
    if (!w.idle.wait_until(lock, deadline, [&] { return !w.running; })) {
      still_running += fmt::format("{}{}", still_running.empty() ? "" : "; ",
                                   workers_detail::context_of(s, w.running->first, w.running->second));
    }
  }
  timeline_.clear();
  origin_.reset();
  if (!still_running.empty()) {
    throw Error(fmt::format("clear: {} is still running after {} ms (StageWorkersOptions::collect_timeout): a stage "
                            "call cannot be interrupted; its result will be dropped",
                            still_running, options_.collect_timeout.count()));
  }
}

int StageWorkers::recorded(int stage) const {
  Worker& w = *workers_.at(static_cast<size_t>(stage));
  std::lock_guard<std::mutex> lock(w.mutex);
  return static_cast<int>(w.records.size());
}

int64_t StageWorkers::live_bytes(int stage) const {
  Worker& w = *workers_.at(static_cast<size_t>(stage));
  std::lock_guard<std::mutex> lock(w.mutex);
  return w.live_bytes;
}

void StageWorkers::run(int s) {
  Worker& w = *workers_[s];
  at::get_num_threads();  // Note [Threads per stage]: LibTorch's lazy initialisation first
  at::set_num_threads(threads_per_stage_);
  use_device(w.stage.device);  // Note [Devices] (core/device.h): this thread's current GPU
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    w.started = true;
  }
  w.result_ready.notify_all();
  while (true) {
    Job job;
    std::optional<Record> held;  // forward: the record made; backward: the record consumed
    bool already_recorded = false;
    {
      // A worker waits for work as long as it takes; the destructor's stop ends the wait.
      std::unique_lock<std::mutex> lock(w.mutex);
      w.work_ready.wait(lock, [&] { return w.stop || !w.in.empty(); });
      if (w.stop) return;
      job = std::move(w.in.front());
      w.in.pop_front();
      auto it = w.records.find(job.task.micro);
      if (job.pass == Pass::kBackward && it != w.records.end()) {
        held = std::move(it->second);
        w.records.erase(it);
      }
      already_recorded = job.pass == Pass::kForward && it != w.records.end();
      w.running.emplace(job.task, job.pass);
    }
    const auto start = std::chrono::steady_clock::now();
    Result result = execute(s, job, held, already_recorded);
    synchronize_device(w.stage.device);  // the timeline's boxes end when the GPU's work does
    const auto end = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(w.mutex);
    w.running.reset();
    w.idle.notify_all();  // clear() may go on: this job touches no tensor of the model any more
    if (job.epoch != w.epoch) continue;  // clear() ran meanwhile: this step is gone
    timeline_.append({s, job.task.micro, job.pass, std::chrono::duration<double>(start - job.origin).count(),
                      std::chrono::duration<double>(end - job.origin).count()});
    if (job.pass == Pass::kForward && held) {
      w.live_bytes += held->bytes;
      timeline_.note_live_bytes(s, w.live_bytes);
      w.records.emplace(job.task.micro, std::move(*held));
    } else if (job.pass == Pass::kBackward && held) {
      w.live_bytes -= held->bytes;
    }
    w.out.push_back(std::move(result));
    w.result_ready.notify_all();
  }
}

StageWorkers::Result StageWorkers::execute(int s, Job& job, std::optional<Record>& held, bool already_recorded) {
  const Stage& stage = workers_[s]->stage;
  Result result{job.task, job.pass, {}, nullptr};
  at::ThreadLocalStateGuard submitters_state(job.submitter);  // a profile records the stages too
  try {
    if (job.pass == Pass::kForward) {
      if (already_recorded) {
        throw Error(fmt::format("the stage already holds micro-batch {}'s activations: its forward ran twice "
                                "without a backward or clear() in between",
                                job.task.micro));
      }
      torch::Tensor input = job.x.to(stage.device).detach();
      if (job.grad_enabled && input.is_floating_point()) input.requires_grad_(true);
      torch::Tensor output;
      {
        at::AutoGradMode mode(job.grad_enabled);  // the submitter's, not this thread's
        output = stage.function(input);
      }
      if (!output.defined()) throw Error("the stage returned an undefined tensor");
      if (job.grad_enabled) {
        held = Record{input, output, workers_detail::bytes_of(input) + workers_detail::bytes_of(output)};
      }
      result.value = output.detach();
    } else {
      if (!held) {
        throw Error("no forward of this micro-batch is recorded at this stage: run its forward with grad mode on "
                    "first, with no clear() in between, and its backward once");
      }
      torch::Tensor gradient = job.x.to(stage.device).detach();
      if (gradient.sizes() != held->output.sizes()) {
        throw Error(fmt::format("the gradient has shape {} but the stage's output has shape {}",
                                workers_detail::shape_of(gradient), workers_detail::shape_of(held->output)));
      }
      // Note [Backward pipelining]: on this thread, through this stage's graph only.
      if (held->output.requires_grad()) torch::autograd::backward({held->output}, {gradient});
      if (held->input.requires_grad()) {
        // An input the output does not depend on gets no .grad: its gradient is zero.
        const torch::Tensor g = held->input.grad();
        result.value = g.defined() ? g : torch::zeros_like(held->input);
      }
    }
  } catch (...) {
    result.error = workers_detail::with_context(workers_detail::context_of(s, job.task, job.pass));
    if (job.pass == Pass::kForward) held.reset();
  }
  return result;
}

}  // namespace dtlab::pipeline
