// Checks and runs the per-rank action lists of a pipeline, see pipeline/simulate.h.
#include "dtlab/pipeline/simulate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "dtlab/core/error.h"

namespace dtlab::pipeline {

namespace simulate_detail {

constexpr int kAbsent = -1;
constexpr double kNotYet = -1.0;  // an end time not reached yet (times are >= 0)

std::string where(size_t stage, size_t position, const Action& action) {
  return fmt::format("stage {}, action {} ({})", stage, position, label(action));
}

void check_cost(const char* name, double value) {
  if (!std::isfinite(value) || value < 0) {
    throw Error(fmt::format("costs.{} is {}: a cost is a duration, finite and at least 0", name, value));
  }
}

// The Note's rules that need no clock: every F(i) and B(i) once, B(i) after F(i).
void check_lists(const std::vector<StageSchedule>& per_stage, int micro_batches) {
  const size_t m = static_cast<size_t>(micro_batches);
  for (size_t s = 0; s < per_stage.size(); ++s) {
    const StageSchedule& list = per_stage[s];
    // position[op][i]: where the list has that action, or kAbsent.
    std::vector<int> position[2] = {std::vector<int>(m, kAbsent), std::vector<int>(m, kAbsent)};
    for (size_t k = 0; k < list.size(); ++k) {
      const Action& a = list[k];
      if (a.op != StageOp::kForward && a.op != StageOp::kBackward) {
        throw Error(fmt::format("stage {}, action {}: operation {} is neither forward nor backward", s, k,
                                static_cast<int>(a.op)));
      }
      if (a.micro < 0 || a.micro >= micro_batches) {
        throw Error(fmt::format("{}: micro-batch {} is out of range: the micro-batches are 0..{}", where(s, k, a),
                                a.micro, micro_batches - 1));
      }
      int& seen = position[static_cast<int>(a.op)][static_cast<size_t>(a.micro)];
      if (seen != kAbsent) {
        throw Error(fmt::format("{}: the {} is there twice, at actions {} and {}", where(s, k, a), describe(a),
                                seen, k));
      }
      seen = static_cast<int>(k);
    }
    for (int i = 0; i < micro_batches; ++i) {
      for (StageOp op : {StageOp::kForward, StageOp::kBackward}) {
        if (position[static_cast<int>(op)][static_cast<size_t>(i)] == kAbsent) {
          const Action missing{op, i};
          throw Error(fmt::format("stage {}: the {} ({}) is missing: every stage runs the forward and the "
                                  "backward of every micro-batch 0..{} once",
                                  s, describe(missing), label(missing), micro_batches - 1));
        }
      }
    }
    for (size_t k = 0; k < list.size(); ++k) {
      const Action& a = list[k];
      const int forward_at = position[0][static_cast<size_t>(a.micro)];
      if (a.op == StageOp::kBackward && forward_at > static_cast<int>(k)) {
        throw Error(fmt::format("{}: the {} comes before its forward (action {}): a backward needs the "
                                "activation its forward stores",
                                where(s, k, a), describe(a), forward_at));
      }
    }
  }
}

// The stage whose message `action` on `stage` receives, or kAbsent when it receives none.
int source_of(const Action& action, int stage, int stages) {
  if (action.op == StageOp::kForward) return stage > 0 ? stage - 1 : kAbsent;
  return stage < stages - 1 ? stage + 1 : kAbsent;
}

// "waits at action 4 (B2) for micro-batch 2's gradient from stage 2"
std::string wait_clause(const StageSchedule& list, size_t position, int stage, int stages) {
  const Action& a = list[position];
  return fmt::format("waits at action {} ({}) for micro-batch {}'s {} from stage {}", position, label(a), a.micro,
                     a.op == StageOp::kForward ? "activation" : "gradient", source_of(a, stage, stages));
}

}  // namespace simulate_detail

SimulationResult simulate(const std::vector<StageSchedule>& per_stage, int micro_batches,
                          const SimulationCosts& costs) {
  using simulate_detail::kAbsent;
  using simulate_detail::kNotYet;
  if (per_stage.empty()) throw Error("no stage schedules to simulate: a pipeline has at least 1 stage");
  if (micro_batches < 1) {
    throw Error(fmt::format("micro_batches is {}: a step needs at least 1 micro-batch", micro_batches));
  }
  simulate_detail::check_cost("forward", costs.forward);
  simulate_detail::check_cost("backward", costs.backward);
  simulate_detail::check_cost("link", costs.link);
  simulate_detail::check_lists(per_stage, micro_batches);

  const int n = static_cast<int>(per_stage.size());
  const size_t m = static_cast<size_t>(micro_batches);
  // end[op][s][i]: when stage s finished that action of micro-batch i, or kNotYet.
  std::vector<std::vector<double>> end[2] = {
      std::vector<std::vector<double>>(per_stage.size(), std::vector<double>(m, kNotYet)),
      std::vector<std::vector<double>>(per_stage.size(), std::vector<double>(m, kNotYet))};
  std::vector<size_t> next(per_stage.size(), 0);  // each stage's next action
  std::vector<int> stored(per_stage.size(), 0);
  SimulationResult result;
  result.peak_activations.assign(per_stage.size(), 0);
  result.timeline.assign(per_stage.size(), {});

  // Run each stage as far as its inputs allow; repeat until a sweep runs nothing. Each action's
  // times depend only on ones already computed, so the sweep order does not change them.
  for (bool ran = true; ran;) {
    ran = false;
    for (size_t s = 0; s < per_stage.size(); ++s) {
      const StageSchedule& list = per_stage[s];
      std::vector<Interval>& ran_here = result.timeline[s];
      for (size_t& k = next[s]; k < list.size(); ++k) {
        const Action& a = list[k];
        const size_t op = static_cast<size_t>(a.op), micro = static_cast<size_t>(a.micro);
        double start = ran_here.empty() ? 0.0 : ran_here.back().end;
        const int source = simulate_detail::source_of(a, static_cast<int>(s), n);
        if (source != kAbsent) {
          const double sent = end[op][static_cast<size_t>(source)][micro];
          if (sent == kNotYet) break;  // blocked in its receive
          start = std::max(start, sent + costs.link);
        }
        const double finish = start + (a.op == StageOp::kForward ? costs.forward : costs.backward);
        end[op][s][micro] = finish;
        ran_here.push_back({start, finish, a});
        stored[s] += a.op == StageOp::kForward ? 1 : -1;
        result.peak_activations[s] = std::max(result.peak_activations[s], stored[s]);
        ran = true;
      }
    }
  }

  double busy = 0;
  size_t done = 0, total = 0;
  for (size_t s = 0; s < per_stage.size(); ++s) {
    for (const Interval& interval : result.timeline[s]) {
      busy += interval.end - interval.start;
      result.makespan = std::max(result.makespan, interval.end);
    }
    done += result.timeline[s].size();
    total += per_stage[s].size();
  }
  result.completed = done == total;
  if (result.makespan > 0) result.bubble_fraction = 1.0 - busy / (n * result.makespan);

  // Who waits for what: every stage left waits for a neighbour that is also left (the lists are
  // complete, so a finished neighbour has sent everything).
  for (int s = 0; s < n && !result.completed; ++s) {
    const StageSchedule& list = per_stage[static_cast<size_t>(s)];
    const size_t k = next[static_cast<size_t>(s)];
    if (k == list.size()) continue;
    const int source = simulate_detail::source_of(list[k], s, n);
    const size_t source_at = next[static_cast<size_t>(source)];
    const StageSchedule& source_list = per_stage[static_cast<size_t>(source)];
    if (!result.deadlock.empty()) result.deadlock += '\n';
    result.deadlock += fmt::format("stage {} {}, which {}", s, simulate_detail::wait_clause(list, k, s, n),
                                   source_at < source_list.size()
                                       ? simulate_detail::wait_clause(source_list, source_at, source, n)
                                       : std::string("has run all its actions"));
  }
  return result;
}

SimulationResult check_schedules(const std::vector<StageSchedule>& per_stage, int micro_batches,
                                 const SimulationCosts& costs) {
  SimulationResult result = simulate(per_stage, micro_batches, costs);
  if (result.completed) return result;
  size_t done = 0, total = 0;
  for (size_t s = 0; s < per_stage.size(); ++s) {
    done += result.timeline[s].size();
    total += per_stage[s].size();
  }
  std::string waits;  // the deadlock's lines on one line, for a one-line error
  for (char c : result.deadlock) waits += c == '\n' ? std::string("; ") : std::string(1, c);
  throw Error(fmt::format("the schedules of {} stages for {} micro-batches deadlock after {} of {} actions: {}",
                          per_stage.size(), micro_batches, done, total, waits));
}

namespace simulate_detail {

// The order in which a stage runs the forwards (or backwards) of its list.
std::vector<int> order_of(const StageSchedule& list, StageOp op) {
  std::vector<int> order;
  for (const Action& a : list) {
    if (a.op == op) order.push_back(a.micro);
  }
  return order;
}

}  // namespace simulate_detail

void check_message_order(const std::vector<StageSchedule>& lists) {
  using simulate_detail::order_of;
  for (size_t s = 0; s + 1 < lists.size(); ++s) {
    const std::vector<int> sent = order_of(lists[s], StageOp::kForward);
    const std::vector<int> received = order_of(lists[s + 1], StageOp::kForward);
    if (sent != received) {
      throw Error(fmt::format("stage {} sends its activations in the order {} but stage {} receives them in the order "
                              "{}: messages between two ranks meet in the order they are posted, so neighbours must "
                              "run their forwards in the same micro-batch order", s, fmt::join(sent, " "), s + 1,
                              fmt::join(received, " ")));
    }
    const std::vector<int> back = order_of(lists[s + 1], StageOp::kBackward);
    const std::vector<int> taken = order_of(lists[s], StageOp::kBackward);
    if (back != taken) {
      throw Error(fmt::format("stage {} sends its gradients in the order {} but stage {} receives them in the order "
                              "{}: messages between two ranks meet in the order they are posted, so neighbours must "
                              "run their backwards in the same micro-batch order", s + 1, fmt::join(back, " "), s,
                              fmt::join(taken, " ")));
    }
  }
}

}  // namespace dtlab::pipeline
