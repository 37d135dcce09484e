// The pipeline simulator (Note [Stage schedules] in pipeline/simulate.h) and the message-order
// check, on hand-written lists and the closed-form GPipe and 1F1B lists of stage_lists.h (an
// answer to the pp TODOs: built only beside solutions/, left out of the student release). No
// tensors.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/pipeline/simulate.h"
#include "dtlab/pipeline/stage_schedule.h"
#include "stage_lists.h"

// One namespace for the whole file: unit suites are compiled in groups (Note [Unity builds]),
// so nothing here may leak into the next file.
namespace stage_simulate_test {

using dtlab::pipeline::Action;
using dtlab::pipeline::check_schedules;
using dtlab::pipeline::Interval;
using dtlab::pipeline::ScheduleKind;
using dtlab::pipeline::simulate;
using dtlab::pipeline::SimulationCosts;
using dtlab::pipeline::SimulationResult;
using dtlab::pipeline::StageOp;
using dtlab::pipeline::StageSchedule;

// The lists of GPipe and 1F1B, by their definitions (what the reference builders return, as
// pp_schedule_test checks).
StageSchedule gpipe_schedule(int stage, int stages, int m) { return stage_lists::gpipe_list(stage, stages, m); }
StageSchedule one_f_one_b_schedule(int stage, int stages, int m) {
  return stage_lists::one_f_one_b_list(stage, stages, m);
}

// Every stage's list of `kind`.
std::vector<StageSchedule> stage_schedules(ScheduleKind kind, int stages, int micro_batches) {
  return stage_lists::stage_schedules_of(gpipe_schedule, one_f_one_b_schedule, kind, stages, micro_batches);
}

constexpr int kMax = 8;  // the grader's loop: every stages and micro-batch count in 1..kMax

using stage_lists::B;
using stage_lists::F;
using stage_lists::parse;

// A 1F1B-shaped list with a warm-up of `warmup` forwards (the students' loop with another count).
StageSchedule one_f_one_b_with_warmup(int warmup, int m) {
  StageSchedule list;
  int f = 0, b = 0;
  while (f < warmup) list.push_back(F(f++));
  while (f < m) {
    list.push_back(F(f++));
    list.push_back(B(b++));
  }
  while (b < m) list.push_back(B(b++));
  return list;
}

using stage_lists::error_of;

using Builder = std::function<StageSchedule(int stage, int stages, int micro_batches)>;

// The grader's check of a builder: every (m, n) in 1..kMax whose lists do not run to the end
// (an error in the lists or a deadlock), as (m, n) pairs.
std::set<std::pair<int, int>> failing_sizes(const Builder& build) {
  std::set<std::pair<int, int>> failing;
  for (int n = 1; n <= kMax; ++n) {
    for (int m = 1; m <= kMax; ++m) {
      std::vector<StageSchedule> lists;
      for (int s = 0; s < n; ++s) lists.push_back(build(s, n, m));
      if (!error_of([&] { check_schedules(lists, m); }).empty()) failing.insert({m, n});
    }
  }
  return failing;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ---------------------------------------------------------------------------------------------
// StageSchedule: the vocabulary and the reference builders

// ---------------------------------------------------------------------------------------------
// ScheduleSimulation: the reference schedules' figures

TEST(ScheduleSimulation, GPipeStoresEveryMicroBatchOnEveryStage) {
  for (int n = 1; n <= kMax; ++n) {
    for (int m = 1; m <= kMax; ++m) {
      const SimulationResult r = simulate(stage_schedules(ScheduleKind::kGPipe, n, m), m);
      EXPECT_EQ(r.peak_activations, std::vector<int>(static_cast<size_t>(n), m)) << "n=" << n << " m=" << m;
    }
  }
}

TEST(ScheduleSimulation, OneFOneBStoresAtMostTheStagesFromItsOwnToTheLast) {
  for (int n = 1; n <= kMax; ++n) {
    for (int m = 1; m <= kMax; ++m) {
      const SimulationResult r = simulate(stage_schedules(ScheduleKind::k1F1B, n, m), m);
      for (int s = 0; s < n; ++s) {
        const int peak = r.peak_activations[static_cast<size_t>(s)];
        EXPECT_EQ(peak, std::min(n - s, m)) << "n=" << n << " m=" << m << " stage " << s;
        EXPECT_LE(peak, n);
      }
    }
  }
}

TEST(ScheduleSimulation, GPipeTakesMPlusNMinusOneSlotsOfAForwardAndABackward) {
  for (int n = 1; n <= kMax; ++n) {
    for (int m = 1; m <= kMax; ++m) {
      const SimulationResult r = simulate(stage_schedules(ScheduleKind::kGPipe, n, m), m);
      EXPECT_DOUBLE_EQ(r.makespan, (m + n - 1) * 3.0) << "n=" << n << " m=" << m;
      EXPECT_NEAR(r.bubble_fraction, double(n - 1) / (m + n - 1), 1e-12) << "n=" << n << " m=" << m;
    }
  }
}

// Without latency 1F1B keeps GPipe's bubble: it saves memory, not time (PipeDream-flush).
TEST(ScheduleSimulation, OneFOneBTakesAsLongAsGPipeWhenMessagesTakeNoTime) {
  for (int n = 1; n <= kMax; ++n) {
    for (int m = 1; m <= kMax; ++m) {
      const SimulationResult gpipe = simulate(stage_schedules(ScheduleKind::kGPipe, n, m), m);
      const SimulationResult ofob = simulate(stage_schedules(ScheduleKind::k1F1B, n, m), m);
      EXPECT_DOUBLE_EQ(ofob.makespan, gpipe.makespan) << "n=" << n << " m=" << m;
      EXPECT_NEAR(ofob.bubble_fraction, gpipe.bubble_fraction, 1e-12) << "n=" << n << " m=" << m;
    }
  }
}

// With a latency L, GPipe pays it once per hop each way: 2 (n - 1) L more. 1F1B pays more, and
// more with every micro-batch: its warm-up is sized for L = 0, which leaves no slack in the
// steady state. On the last stage, F(k+2) needs F(k+2) from stage n-2, which stage n-2 runs
// after its B(k), which needs the last stage's B(k): a round trip of b + f + 2 L, where the last
// stage itself has only F(k+1) and B(k+1) (f + b) to do in between. So 2 L is lost every two
// micro-batches there, and more deeper in the pipeline: up to 2 L per micro-batch after the
// second. With m <= 2 there is no steady state to lose it in.
TEST(ScheduleSimulation, OneFOneBIsSlowerThanGPipeWhenMessagesTakeTime) {
  const double link = 0.5;
  const SimulationCosts costs{1.0, 2.0, link};
  for (int n = 1; n <= kMax; ++n) {
    for (int m = 1; m <= kMax; ++m) {
      const SimulationResult gpipe = simulate(stage_schedules(ScheduleKind::kGPipe, n, m), m, costs);
      const SimulationResult ofob = simulate(stage_schedules(ScheduleKind::k1F1B, n, m), m, costs);
      EXPECT_DOUBLE_EQ(gpipe.makespan, (m + n - 1) * 3.0 + 2 * (n - 1) * link) << "n=" << n << " m=" << m;
      if (n == 1 || m <= 2) {
        EXPECT_DOUBLE_EQ(ofob.makespan, gpipe.makespan) << "n=" << n << " m=" << m;
      } else {
        EXPECT_GT(ofob.makespan, gpipe.makespan) << "n=" << n << " m=" << m;
        EXPECT_LE(ofob.makespan, gpipe.makespan + 2 * (m - 2) * link) << "n=" << n << " m=" << m;
      }
      // With at least as many stages as micro-batches, the whole 2 L per micro-batch.
      if (n >= m && m >= 2) {
        EXPECT_DOUBLE_EQ(ofob.makespan, gpipe.makespan + 2 * (m - 2) * link) << "n=" << n << " m=" << m;
      }
    }
  }
  // Two stages, 8 micro-batches: 2 L lost every two micro-batches after the second, 3 x 2 L.
  EXPECT_DOUBLE_EQ(simulate(stage_schedules(ScheduleKind::k1F1B, 2, 8), 8, costs).makespan, 28.0 + 3.0);
  EXPECT_DOUBLE_EQ(simulate(stage_schedules(ScheduleKind::kGPipe, 2, 8), 8, costs).makespan, 28.0);
}

// The model itself, on every interval: a stage runs one action at a time for its cost, and
// starts an action only once its input has arrived.
TEST(ScheduleSimulation, EveryIntervalLastsItsCostAndStartsAfterItsInputArrives) {
  const SimulationCosts costs{1.0, 2.5, 0.25};
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B}) {
    const int n = 4, m = 6;
    const SimulationResult r = simulate(stage_schedules(kind, n, m), m, costs);
    ASSERT_TRUE(r.completed);
    auto end_of = [&](int s, const Action& a) {
      for (const Interval& i : r.timeline[static_cast<size_t>(s)]) {
        if (i.action == a) return i.end;
      }
      ADD_FAILURE() << "no " << dtlab::pipeline::label(a) << " on stage " << s;
      return 0.0;
    };
    double last_end = 0, busy = 0;
    for (int s = 0; s < n; ++s) {
      double previous_end = 0;
      for (const Interval& i : r.timeline[static_cast<size_t>(s)]) {
        EXPECT_DOUBLE_EQ(i.end - i.start, i.action.op == StageOp::kForward ? costs.forward : costs.backward);
        EXPECT_GE(i.start, previous_end);
        if (i.action.op == StageOp::kForward && s > 0) {
          EXPECT_GE(i.start, end_of(s - 1, i.action) + costs.link);
        }
        if (i.action.op == StageOp::kBackward && s < n - 1) {
          EXPECT_GE(i.start, end_of(s + 1, i.action) + costs.link);
        }
        previous_end = i.end;
        busy += i.end - i.start;
        last_end = std::max(last_end, i.end);
      }
    }
    EXPECT_DOUBLE_EQ(r.makespan, last_end);
    EXPECT_NEAR(r.bubble_fraction, 1.0 - busy / (n * r.makespan), 1e-12);
  }
}

TEST(ScheduleSimulation, OneStageHasNoBubble) {
  const SimulationResult r = simulate(stage_schedules(ScheduleKind::k1F1B, 1, 5), 5);
  EXPECT_DOUBLE_EQ(r.makespan, 15.0);
  EXPECT_DOUBLE_EQ(r.bubble_fraction, 0.0);
}

TEST(ScheduleSimulation, CheckSchedulesReturnsTheResultOfListsThatComplete) {
  const SimulationResult r = check_schedules(stage_schedules(ScheduleKind::k1F1B, 4, 8), 8);
  EXPECT_TRUE(r.completed);
  EXPECT_EQ(r.peak_activations, (std::vector<int>{4, 3, 2, 1}));
}

// ---------------------------------------------------------------------------------------------
// ScheduleSimulation: lists that are wrong

TEST(ScheduleSimulation, AMissingBackwardNamesTheStageAndTheAction) {
  auto lists = stage_schedules(ScheduleKind::k1F1B, 4, 8);
  lists[2].pop_back();  // B7, the cool-down's last
  const std::string message = error_of([&] { simulate(lists, 8); });
  EXPECT_TRUE(contains(message, "stage 2: the backward of micro-batch 7 (B7) is missing")) << message;
}

TEST(ScheduleSimulation, ADuplicatedForwardNamesBothPositions) {
  auto lists = stage_schedules(ScheduleKind::kGPipe, 3, 8);
  lists[1][4] = F(3);  // F3 F3 where F3 F4 was
  const std::string message = error_of([&] { simulate(lists, 8); });
  EXPECT_TRUE(contains(message, "stage 1, action 4 (F3): the forward of micro-batch 3 is there twice, at actions 3 "
                                "and 4"))
      << message;
}

TEST(ScheduleSimulation, ABackwardBeforeItsForwardIsAnErrorOfTheListNotAWait) {
  auto lists = stage_schedules(ScheduleKind::k1F1B, 4, 8);
  std::swap(lists[3][0], lists[3][1]);  // B0 F0 on the last stage
  const std::string message = error_of([&] { simulate(lists, 8); });
  EXPECT_TRUE(contains(message, "stage 3, action 0 (B0): the backward of micro-batch 0 comes before its forward "
                                "(action 1)"))
      << message;
}

TEST(ScheduleSimulation, AMicroBatchOutOfRangeNamesTheRange) {
  auto lists = stage_schedules(ScheduleKind::kGPipe, 2, 4);
  lists[0][2] = F(4);
  const std::string message = error_of([&] { simulate(lists, 4); });
  EXPECT_TRUE(contains(message, "stage 0, action 2 (F4): micro-batch 4 is out of range: the micro-batches are 0..3"))
      << message;
}

TEST(ScheduleSimulation, BadArgumentsAndCostsAreNamed) {
  EXPECT_TRUE(contains(error_of([] { simulate({}, 4); }), "no stage schedules"));
  EXPECT_TRUE(contains(error_of([] { simulate(stage_schedules(ScheduleKind::kGPipe, 2, 4), 0); }),
                       "micro_batches is 0"));
  EXPECT_TRUE(contains(error_of([] { simulate(stage_schedules(ScheduleKind::kGPipe, 2, 4), 4, {1, -2, 0}); }),
                       "costs.backward is -2"));
  const double infinity = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(contains(error_of([&] { simulate(stage_schedules(ScheduleKind::kGPipe, 2, 4), 4, {1, 2, infinity}); }),
                       "costs.link is inf"));
  // An empty list is every action missing, not a pipeline that finishes at once.
  EXPECT_TRUE(contains(error_of([] { simulate({StageSchedule{}}, 1); }), "stage 0: the forward of micro-batch 0"));
}

// Stage 1 runs its backwards in the reverse order of stage 0's: its B0 comes last, after F2,
// which stage 0 sends only after its own B0, which needs stage 1's B0.
TEST(ScheduleSimulation, BackwardsInTheReverseOrderOfTheNeighboursDeadlockAndTheTextSaysWhoWaitsForWhat) {
  const std::vector<StageSchedule> lists = {parse("F0 F1 B0 F2 B1 B2"), parse("F0 F1 F2 B2 B1 B0")};
  const SimulationResult r = simulate(lists, 3);
  EXPECT_FALSE(r.completed);
  EXPECT_EQ(r.deadlock,
            "stage 0 waits at action 2 (B0) for micro-batch 0's gradient from stage 1, which waits at action 2 (F2) "
            "for micro-batch 2's activation from stage 0\n"
            "stage 1 waits at action 2 (F2) for micro-batch 2's activation from stage 0, which waits at action 2 "
            "(B0) for micro-batch 0's gradient from stage 1");
  // What ran before the deadlock is measured: F0 F1 on each stage.
  EXPECT_EQ(r.timeline[0].size(), 2u);
  EXPECT_EQ(r.timeline[1].size(), 2u);
  EXPECT_EQ(r.peak_activations, (std::vector<int>{2, 2}));
  const std::string message = error_of([&] { check_schedules(lists, 3); });
  EXPECT_EQ(message,
            "the schedules of 2 stages for 3 micro-batches deadlock after 4 of 12 actions: stage 0 waits at action 2 "
            "(B0) for micro-batch 0's gradient from stage 1, which waits at action 2 (F2) for micro-batch 2's "
            "activation from stage 0; stage 1 waits at action 2 (F2) for micro-batch 2's activation from stage 0, "
            "which waits at action 2 (B0) for micro-batch 0's gradient from stage 1");
}

// Stage 2 warms up with 3 forwards instead of 2, as many as stage 1: it needs F3 before it
// sends the gradient of micro-batch 0, and stage 1 sends F3 only after that gradient's backward.
TEST(ScheduleSimulation, AWarmUpThatGrowsFromOneStageToTheNextDeadlocks) {
  auto lists = stage_schedules(ScheduleKind::k1F1B, 4, 8);
  lists[2] = one_f_one_b_with_warmup(3, 8);
  const SimulationResult r = simulate(lists, 8);
  EXPECT_FALSE(r.completed);
  EXPECT_TRUE(contains(r.deadlock, "stage 1 waits at action 3 (B0) for micro-batch 0's gradient from stage 2, which "
                                   "waits at action 3 (F3) for micro-batch 3's activation from stage 1"))
      << r.deadlock;
  EXPECT_TRUE(contains(r.deadlock, "stage 2 waits at action 3 (F3) for micro-batch 3's activation from stage 1, "
                                   "which waits at action 3 (B0)"))
      << r.deadlock;
  // The stages outside the cycle wait too, and say on whom.
  EXPECT_TRUE(contains(r.deadlock, "stage 0 waits at action 4 (B0) for micro-batch 0's gradient from stage 1"));
  EXPECT_TRUE(contains(r.deadlock, "stage 3 waits at action 6 (F3) for micro-batch 3's activation from stage 2"));
  EXPECT_EQ(std::count(r.deadlock.begin(), r.deadlock.end(), '\n'), 3);  // one line per stage
  // With 3 micro-batches stage 2's warm-up is every forward anyway: no deadlock.
  auto few = stage_schedules(ScheduleKind::k1F1B, 4, 3);
  few[2] = one_f_one_b_with_warmup(3, 3);
  EXPECT_TRUE(simulate(few, 3).completed);
}

// ---------------------------------------------------------------------------------------------
// ScheduleSimulation: the grader's loop over sizes finds mutants that only some sizes expose

// A student's builder that special-cases stage 1 with GPipe's list. Stage 0 runs 1F1B with a
// warm-up of n - 1: it blocks on the gradient of micro-batch 0 after sending F0..F(n-1), and
// stage 1 needs all m activations first. Fine while m <= n, a deadlock from m = n + 1.
TEST(ScheduleSimulation, TheLoopOverSizesFindsAMutantThatOnlyDeadlocksWithManyMicroBatches) {
  const Builder mutant = [](int s, int n, int m) {
    return s == 1 ? gpipe_schedule(s, n, m) : one_f_one_b_schedule(s, n, m);
  };
  std::set<std::pair<int, int>> expected;
  for (int n = 2; n <= kMax; ++n) {
    for (int m = n + 1; m <= kMax; ++m) expected.insert({m, n});
  }
  EXPECT_EQ(failing_sizes(mutant), expected);
  // The sizes a student tries first pass: 4 stages and 4 micro-batches, 2 and 2, 8 and 8.
  for (int n : {2, 4, 8}) EXPECT_EQ(failing_sizes(mutant).count({n, n}), 0u);
  // With 7 stages only 8 micro-batches expose it.
  std::vector<StageSchedule> lists;
  for (int s = 0; s < 7; ++s) lists.push_back(mutant(s, 7, 8));
  const std::string message = error_of([&] { check_schedules(lists, 8); });
  EXPECT_TRUE(contains(message, "stage 0 waits at action 7 (B0) for micro-batch 0's gradient from stage 1, which "
                                "waits at action 7 (F7) for micro-batch 7's activation from stage 0"))
      << message;
}

// A student who keeps the warm-up within the micro-batches with % instead of min: right when
// m >= n - s (the modulo changes nothing) and when m = 1, a deadlock for 2 <= m <= n - 1, where
// stage 0's warm-up wraps to a smaller one than stage 1's.
TEST(ScheduleSimulation, TheLoopOverSizesFindsAMutantThatOnlyDeadlocksWithFewMicroBatches) {
  const Builder mutant = [](int s, int n, int m) { return one_f_one_b_with_warmup((n - s - 1) % m, m); };
  std::set<std::pair<int, int>> expected;
  for (int n = 3; n <= kMax; ++n) {
    for (int m = 2; m <= n - 1; ++m) expected.insert({m, n});
  }
  EXPECT_EQ(failing_sizes(mutant), expected);
  EXPECT_EQ(failing_sizes(mutant).count({8, 4}), 0u);  // the handout's 4 stages, 8 micro-batches pass
}

// c10d pairs messages by order: a stage that takes its backwards in another order than its
// neighbour sends the gradients would compute on the wrong micro-batch's gradient, silently. The
// simulator hands each receive its own micro-batch and passes such lists; check_message_order names
// the link.
TEST(MessageOrder, NeighboursThatRunTheirBackwardsInDifferentOrdersAreNamed) {
  std::vector<StageSchedule> lists = stage_schedules(ScheduleKind::kGPipe, 3, 3);
  EXPECT_NO_THROW(dtlab::pipeline::check_message_order(lists));
  EXPECT_NO_THROW(dtlab::pipeline::check_message_order(stage_schedules(ScheduleKind::k1F1B, 8, 8)));
  lists[2] = parse("F0 F1 F2 B2 B1 B0");  // the last stage drains last-in first-out
  EXPECT_TRUE(simulate(lists, 3).completed);
  const std::string message = error_of([&] { dtlab::pipeline::check_message_order(lists); });
  EXPECT_TRUE(contains(message, "stage 2 sends its gradients in the order 2 1 0 but stage 1 receives them in the "
                                "order 0 1 2")) << message;
  lists = stage_schedules(ScheduleKind::kGPipe, 2, 3);
  lists[1] = parse("F1 F0 F2 B0 B1 B2");
  EXPECT_TRUE(contains(error_of([&] { dtlab::pipeline::check_message_order(lists); }),
                       "stage 0 sends its activations in the order 0 1 2 but stage 1 receives them in the order 1 0 2"));
}

}  // namespace stage_simulate_test

