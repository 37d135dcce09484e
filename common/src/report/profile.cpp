// The profiler's window, self times and files, see report/profile.h.
#include "dtlab/report/profile.h"

#include <ATen/record_function.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/profiler_legacy.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "dtlab/core/error.h"
#include "dtlab/io/file.h"

namespace dtlab::report {

namespace profile_detail {

namespace legacy = torch::autograd::profiler;

// The profiler's push and pop events paired into ranges by their handle (unique in the
// process). A pop usually lands in the list of the thread that pushed; an asynchronous range
// (c10d's "gloo:all_reduce": started by the caller, ended by Gloo's thread when the collective
// completes) pops elsewhere.
std::vector<ProfiledRange> ranges_of(const legacy::thread_event_lists& lists) {
  std::unordered_map<at::RecordFunctionHandle, std::pair<const legacy::LegacyEvent*, size_t>> pushes;
  for (size_t l = 0; l < lists.size(); ++l) {
    for (const auto& event : lists[l]) {
      if (event.kind() == legacy::EventKind::PushRange) pushes[event.handle()] = {&event, l};
    }
  }
  std::vector<ProfiledRange> ranges;
  for (size_t l = 0; l < lists.size(); ++l) {
    for (const auto& event : lists[l]) {
      if (event.kind() != legacy::EventKind::PopRange) continue;
      auto it = pushes.find(event.handle());
      if (it == pushes.end()) continue;  // pushed before the profiler started
      const legacy::LegacyEvent& push = *it->second.first;
      ProfiledRange r;
      r.name = push.name();
      r.thread = push.threadId();
      r.start_us = push.cpuUs();
      r.end_us = event.cpuUs();
      r.backward_function = push.scope() == static_cast<uint8_t>(at::RecordScope::BACKWARD_FUNCTION);
      r.user_scope = push.scope() == static_cast<uint8_t>(at::RecordScope::USER_SCOPE);
      r.async = it->second.second != l;
      ranges.push_back(std::move(r));
      pushes.erase(it);
    }
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const ProfiledRange& a, const ProfiledRange& b) { return a.start_us < b.start_us; });
  return ranges;
}

}  // namespace profile_detail

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::forward: return "forward";
    case Phase::backward: return "backward";
    case Phase::update: return "update";
  }
  return "?";
}

std::vector<OperatorTime> operator_times(const std::vector<ProfiledRange>& ranges) {
  // Per thread, by start time (the outer of two equal starts first): a stack of open ranges
  // gives every range its parent, its phase and its children's time.
  std::map<uint64_t, std::vector<const ProfiledRange*>> by_thread;
  for (const auto& r : ranges) {
    if (!r.async) by_thread[r.thread].push_back(&r);  // an async range does not nest: trace only
  }
  struct Open {
    const ProfiledRange* range;
    Phase phase;
    double children_us = 0;
  };
  std::map<std::pair<Phase, std::string>, OperatorTime> table;
  auto close = [&](const Open& o) {
    if (o.range->backward_function || o.range->user_scope) return;  // scopes are not operators
    OperatorTime& t = table[{o.phase, o.range->name}];
    t.name = o.range->name;
    t.phase = o.phase;
    t.calls += 1;
    const double total = o.range->end_us - o.range->start_us;
    t.total_us += total;
    t.self_us += std::max(0.0, total - o.children_us);
  };
  for (auto& [thread, list] : by_thread) {
    std::sort(list.begin(), list.end(), [](const ProfiledRange* a, const ProfiledRange* b) {
      return a->start_us != b->start_us ? a->start_us < b->start_us : a->end_us > b->end_us;
    });
    std::vector<Open> stack;
    for (const ProfiledRange* r : list) {
      while (!stack.empty() && stack.back().range->end_us <= r->start_us) {
        close(stack.back());
        stack.pop_back();
      }
      Phase phase = stack.empty() ? Phase::forward : stack.back().phase;
      if (r->backward_function) phase = Phase::backward;
      if (r->user_scope && r->name.rfind(kUpdateScope, 0) == 0) phase = Phase::update;
      if (!stack.empty()) stack.back().children_us += r->end_us - r->start_us;
      stack.push_back({r, phase});
    }
    while (!stack.empty()) {
      close(stack.back());
      stack.pop_back();
    }
  }
  std::vector<OperatorTime> times;
  for (auto& [key, t] : table) times.push_back(std::move(t));
  std::sort(times.begin(), times.end(),
            [](const OperatorTime& a, const OperatorTime& b) { return a.self_us > b.self_us; });
  return times;
}

std::string format_operator_table(const std::vector<OperatorTime>& times, int64_t steps,
                                  const std::string& what, size_t top) {
  if (steps <= 0) throw Error("format_operator_table: steps must be positive");
  const double per_step = 1.0 / double(steps);
  double all_self = 0;
  for (const auto& t : times) all_self += t.self_us;
  std::string out = fmt::format(
      "Where the time goes: {}, LibTorch's autograd profiler (legacy CPU profiler), per step.\n"
      "self ms: time inside the operator itself, less the operators it called; total ms: children\n"
      "included; calls: per step. Sum of self times: {:.1f} ms per step. The trace of the same steps\n"
      "is trace.json (https://ui.perfetto.dev or chrome://tracing).\n",
      what, all_self * per_step / 1000);
  for (Phase phase : {Phase::forward, Phase::backward, Phase::update}) {
    double phase_self = 0;
    size_t count = 0;
    for (const auto& t : times) {
      if (t.phase == phase) phase_self += t.self_us, ++count;
    }
    out += fmt::format("\n{}: {:.1f} ms per step ({:.0f}% of the self time), {} operator{}\n", phase_name(phase),
                       phase_self * per_step / 1000, all_self > 0 ? 100 * phase_self / all_self : 0.0, count,
                       count == 1 ? "" : "s");
    if (count == 0) continue;
    out += fmt::format("  {:<44} {:>9} {:>7} {:>9} {:>7}\n", "operator", "self ms", "self %", "total ms", "calls");
    size_t shown = 0;
    for (const auto& t : times) {
      if (t.phase != phase || shown == top) continue;
      ++shown;
      out += fmt::format("  {:<44} {:>9.2f} {:>6.1f}% {:>9.2f} {:>7.0f}\n", t.name.substr(0, 44),
                         t.self_us * per_step / 1000, all_self > 0 ? 100 * t.self_us / all_self : 0.0,
                         t.total_us * per_step / 1000, double(t.calls) * per_step);
    }
  }
  return out;
}

void write_chrome_trace(const std::filesystem::path& path, const std::vector<ProfiledRange>& ranges,
                        const std::string& process_name) {
  double origin = ranges.empty() ? 0 : ranges.front().start_us;
  for (const auto& r : ranges) origin = std::min(origin, r.start_us);
  std::map<uint64_t, int> rows;  // LibTorch's thread ids, numbered from 0 in order of appearance
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"name", process_name}}}});
  std::map<uint64_t, int> async_rows;  // a row of its own per thread: async ranges do not nest
  for (const auto& r : ranges) {
    auto [it, added] = rows.emplace(r.thread, int(rows.size()));
    if (added) {
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", it->second},
                        {"args", {{"name", fmt::format("thread {}", it->second)}}}});
    }
    int row = it->second;
    if (r.async) {
      row = 1000 + it->second;
      if (async_rows.emplace(r.thread, row).second) {
        events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", row},
                          {"args", {{"name", fmt::format("thread {}: started there, ended elsewhere "
                                                         "(collectives)", it->second)}}}});
      }
    }
    events.push_back({{"name", r.name},
                      {"cat", r.async ? "async" : r.backward_function ? "backward" : r.user_scope ? "scope" : "operator"},
                      {"ph", "X"}, {"pid", 0}, {"tid", row}, {"ts", r.start_us - origin},
                      {"dur", r.end_us - r.start_us}});
  }
  const nlohmann::json trace = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  io::write_file_atomically(path, trace.dump() + "\n");
}

StepProfiler::StepProfiler(std::filesystem::path dir, std::string what, int64_t first_step, int64_t steps)
    : dir_(std::move(dir)), what_(std::move(what)), first_step_(first_step), steps_(steps) {
  if (steps_ < 0 || first_step_ < 1) throw Error("StepProfiler: the window must start at step 1 or later");
}

StepProfiler::~StepProfiler() {
  if (!recording_) return;
  try {
    finish();
  } catch (const std::exception& e) {
    fmt::print(stderr, "warning: the profile was not written: {}\n", e.what());
  }
}

void StepProfiler::before_step(int64_t step) {
  if (steps_ == 0 || recording_ || written_ || step != first_step_) return;
  // Shapes and memory stay off: they cost time on every operator and the table does not use them.
  profile_detail::legacy::enableProfilerLegacy(torch::profiler::impl::ProfilerConfig(
      torch::profiler::impl::ProfilerState::CPU, /*report_input_shapes=*/false, /*profile_memory=*/false));
  recording_ = true;
}

bool StepProfiler::after_step(int64_t step) {
  if (!recording_) return false;
  ++recorded_;
  if (step < first_step_ + steps_ - 1) return false;
  finish();
  return written_;
}

std::string StepProfiler::close() {
  if (steps_ == 0 || (written_ && !recording_)) return "";  // not asked for, or announced
  if (recording_) finish();
  if (written_) {
    return fmt::format("profile: the run ended after {} of the {} profiled steps: {} and {}", recorded_, steps_,
                       (dir_ / "trace.json").string(), (dir_ / "profile.txt").string());
  }
  return fmt::format("profile: the run ended before step {}, the first profiled one: nothing written (give "
                     "--max_steps {} or more)",
                     first_step_, first_step_ + steps_ - 1);
}

void StepProfiler::finish() {
  recording_ = false;
  const auto lists = profile_detail::legacy::disableProfilerLegacy();
  const std::vector<ProfiledRange> ranges = profile_detail::ranges_of(lists);
  if (recorded_ == 0) return;
  const std::string what = fmt::format("{}, step{} {}", what_, recorded_ > 1 ? "s" : "",
                                       recorded_ > 1 ? fmt::format("{}-{}", first_step_, first_step_ + recorded_ - 1)
                                                     : std::to_string(first_step_));
  std::filesystem::create_directories(dir_);
  write_chrome_trace(dir_ / "trace.json", ranges, what);
  io::write_file_atomically(dir_ / "profile.txt", format_operator_table(operator_times(ranges), recorded_, what));
  written_ = true;
}

}  // namespace dtlab::report
