// Per-rank pipeline schedules: the reference GPipe and 1F1B lists (the pp exercise's solution,
// solutions/pp/schedule.cpp, compiled in) against the kit's closed-form lists and the simulator.
// The simulator's own suite, on hand-written lists and those of stage_lists.h, is
// stage_simulate_test.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/pipeline/simulate.h"
#include "dtlab/pipeline/stage_schedule.h"
#include "dtlab/tasks/pp.h"
#include "stage_lists.h"

// One namespace for the whole file: unit suites are compiled in groups (Note [Unity builds]),
// so nothing here may leak into the next file.
namespace pp_schedule_test {

using dtlab::pipeline::Action;
using dtlab::pipeline::ScheduleKind;
using dtlab::pipeline::simulate;
using dtlab::pipeline::SimulationResult;
using dtlab::pipeline::StageOp;
using dtlab::pipeline::StageSchedule;
using dtlab::pp::gpipe_schedule;
using dtlab::pp::one_f_one_b_schedule;

// Every stage's list of the reference builder of `kind`.
std::vector<StageSchedule> stage_schedules(ScheduleKind kind, int stages, int micro_batches) {
  return stage_lists::stage_schedules_of(gpipe_schedule, one_f_one_b_schedule, kind, stages, micro_batches);
}

constexpr int kMax = 8;  // the grader's loop: every stages and micro-batch count in 1..kMax

using stage_lists::B;
using stage_lists::F;
using stage_lists::parse;

using stage_lists::error_of;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ---------------------------------------------------------------------------------------------
// StageSchedule: the vocabulary and the reference builders

TEST(StageSchedule, ActionsHaveAShortLabelAndALongDescription) {
  EXPECT_EQ(dtlab::pipeline::label(F(3)), "F3");
  EXPECT_EQ(dtlab::pipeline::label(B(12)), "B12");
  EXPECT_EQ(dtlab::pipeline::describe(F(3)), "forward of micro-batch 3");
  EXPECT_EQ(dtlab::pipeline::describe(B(0)), "backward of micro-batch 0");
  EXPECT_EQ(dtlab::pipeline::schedule_text({F(0), F(1), B(0), B(1)}), "F0 F1 B0 B1");
  EXPECT_EQ(dtlab::pipeline::schedule_text({}), "");
  EXPECT_TRUE(F(2) == F(2));
  EXPECT_TRUE(F(2) != B(2));
  EXPECT_TRUE(F(2) != F(3));
}

TEST(StageSchedule, KindsParseFromTheirNamesAndAnythingElseNamesTheAcceptedValues) {
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B}) {
    EXPECT_EQ(dtlab::pipeline::parse_schedule_kind(dtlab::pipeline::schedule_kind_name(kind)), kind);
  }
  EXPECT_STREQ(dtlab::pipeline::schedule_kind_name(ScheduleKind::kGPipe), "gpipe");
  EXPECT_STREQ(dtlab::pipeline::schedule_kind_name(ScheduleKind::k1F1B), "1f1b");
  for (const std::string bad : {"GPipe", "1F1B", "", "pipedream"}) {
    const std::string message = error_of([&] { dtlab::pipeline::parse_schedule_kind(bad); });
    EXPECT_TRUE(contains(message, "'" + bad + "'")) << message;
    EXPECT_TRUE(contains(message, "gpipe and 1f1b")) << message;
  }
}

TEST(StageSchedule, BuildersNameTheArgumentThatIsOutOfRange) {
  for (auto* build : {&gpipe_schedule, &one_f_one_b_schedule}) {
    const std::string name = build == &gpipe_schedule ? "gpipe_schedule" : "one_f_one_b_schedule";
    std::string message = error_of([&] { build(4, 4, 8); });
    EXPECT_TRUE(contains(message, name + ": stage is 4: the stages of a 4-stage pipeline are 0..3")) << message;
    message = error_of([&] { build(-1, 4, 8); });
    EXPECT_TRUE(contains(message, "stage is -1")) << message;
    message = error_of([&] { build(0, 0, 8); });
    EXPECT_TRUE(contains(message, "stages is 0")) << message;
    message = error_of([&] { build(0, 4, 0); });
    EXPECT_TRUE(contains(message, "micro_batches is 0")) << message;
  }
  EXPECT_TRUE(contains(error_of([] { stage_schedules(ScheduleKind::k1F1B, 0, 8); }), "stages is 0"));
  EXPECT_TRUE(contains(error_of([] { stage_schedules(ScheduleKind::kGPipe, 2, -3); }), "micro_batches is -3"));
}

TEST(StageSchedule, GPipeRunsEveryForwardThenEveryBackwardInMicroBatchOrderOnEveryStage) {
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(gpipe_schedule(s, 4, 3), parse("F0 F1 F2 B0 B1 B2")) << "stage " << s;
  }
  EXPECT_EQ(gpipe_schedule(0, 1, 1), parse("F0 B0"));
}

// The handout's table (docs/STAGE_SCHEDULES.md): warm-up 3, 2, 1, 0, then one forward, one
// backward, then the cool-down.
TEST(StageSchedule, OneFOneBForFourStagesAndEightMicroBatchesIsPipeDreamFlush) {
  const std::vector<StageSchedule> expected = {
      parse("F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7"),
      parse("F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7"),
      parse("F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7"),
      parse("F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"),
  };
  EXPECT_EQ(stage_schedules(ScheduleKind::k1F1B, 4, 8), expected);
}

TEST(StageSchedule, OneFOneBWithFewerMicroBatchesThanStagesWarmsUpWithAllOfThem) {
  // Stage 0 of 4 would warm up with 3 forwards; there are only 2: it runs GPipe's list.
  EXPECT_EQ(one_f_one_b_schedule(0, 4, 2), parse("F0 F1 B0 B1"));
  EXPECT_EQ(one_f_one_b_schedule(2, 4, 2), parse("F0 F1 B0 B1"));
  EXPECT_EQ(one_f_one_b_schedule(3, 4, 2), parse("F0 B0 F1 B1"));
  EXPECT_EQ(one_f_one_b_schedule(0, 1, 3), parse("F0 B0 F1 B1 F2 B2"));
}

TEST(StageSchedule, BothBuildersRunForwardsAndBackwardsInMicroBatchOrderWithTheWarmUpBeforeTheFirstBackward) {
  for (int n = 1; n <= kMax; ++n) {
    for (int m = 1; m <= kMax; ++m) {
      for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B}) {
        const auto lists = stage_schedules(kind, n, m);
        ASSERT_EQ(lists.size(), static_cast<size_t>(n));
        for (int s = 0; s < n; ++s) {
          const StageSchedule& list = lists[static_cast<size_t>(s)];
          ASSERT_EQ(list.size(), static_cast<size_t>(2 * m));
          int forwards = 0, backwards = 0;
          for (const Action& a : list) {
            EXPECT_EQ(a.micro, a.op == StageOp::kForward ? forwards++ : backwards++);
          }
          const auto first_backward = std::find_if(list.begin(), list.end(),
                                                   [](const Action& a) { return a.op == StageOp::kBackward; });
          const int before = static_cast<int>(first_backward - list.begin());
          // GPipe: all m; 1F1B: the warm-up and the steady state's first forward, or all m.
          EXPECT_EQ(before, kind == ScheduleKind::kGPipe ? m : std::min(n - s, m))
              << dtlab::pipeline::schedule_kind_name(kind) << " n=" << n << " m=" << m << " stage " << s;
        }
      }
    }
  }
}
// ---------------------------------------------------------------------------------------------
// ScheduleSimulation: the reference schedules' figures

TEST(ReferenceSchedules, BothReferenceSchedulesCompleteForEverySizeUpToEight) {
  for (int n = 1; n <= kMax; ++n) {
    for (int m = 1; m <= kMax; ++m) {
      for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B}) {
        const SimulationResult r = simulate(stage_schedules(kind, n, m), m);
        EXPECT_TRUE(r.completed) << dtlab::pipeline::schedule_kind_name(kind) << " n=" << n << " m=" << m << ": "
                                 << r.deadlock;
        EXPECT_EQ(r.deadlock, "");
        ASSERT_EQ(r.timeline.size(), static_cast<size_t>(n));
        for (const auto& stage : r.timeline) EXPECT_EQ(stage.size(), static_cast<size_t>(2 * m));
      }
    }
  }
}

// The simulator's suite (stage_simulate_test) runs the closed-form lists of stage_lists.h; they
// are the reference builders' lists, so what it proves of them holds of the reference.
TEST(ReferenceSchedules, TheReferenceListsAreTheClosedFormListsTheSimulatorSuiteRuns) {
  for (int n = 1; n <= kMax; ++n) {
    for (int m = 1; m <= kMax; ++m) {
      for (int s = 0; s < n; ++s) {
        EXPECT_EQ(gpipe_schedule(s, n, m), stage_lists::gpipe_list(s, n, m)) << "n=" << n << " m=" << m << " s=" << s;
        EXPECT_EQ(one_f_one_b_schedule(s, n, m), stage_lists::one_f_one_b_list(s, n, m))
            << "n=" << n << " m=" << m << " s=" << s;
      }
    }
  }
}

}  // namespace pp_schedule_test
