// GPipe's and 1F1B's per-stage lists written from their definitions (handouts/pp.md), for the
// tests: the simulator's suite runs them, and pp_schedule_test holds the reference builders to
// them. They answer the pp exercise's TODOs: the student release leaves this file and its users out
// (grader/release.cpp).
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/pipeline/stage_schedule.h"

namespace stage_lists {

inline dtlab::pipeline::Action F(int i) { return {dtlab::pipeline::StageOp::kForward, i}; }
inline dtlab::pipeline::Action B(int i) { return {dtlab::pipeline::StageOp::kBackward, i}; }

// "F0 F1 B0" -> the list, so the expected lists read as the tables of the handout.
inline dtlab::pipeline::StageSchedule parse(const std::string& text) {
  dtlab::pipeline::StageSchedule list;
  size_t at = 0;
  while (at < text.size()) {
    const size_t space = std::min(text.find(' ', at), text.size());
    const int micro = std::stoi(text.substr(at + 1, space - at - 1));
    list.push_back(text[at] == 'F' ? F(micro) : B(micro));
    at = space + 1;
  }
  return list;
}

// Every stage's list of `kind`, from GPipe's and 1F1B's builders (the reference's, or those above).
inline std::vector<dtlab::pipeline::StageSchedule> stage_schedules_of(dtlab::pipeline::ScheduleBuilder gpipe,
                                                                      dtlab::pipeline::ScheduleBuilder one_f_one_b,
                                                                      dtlab::pipeline::ScheduleKind kind, int stages,
                                                                      int micro_batches) {
  return dtlab::pipeline::stage_schedules(kind == dtlab::pipeline::ScheduleKind::kGPipe ? gpipe : one_f_one_b, stages,
                                          micro_batches);
}

// The dtlab::Error message of `run`, or "" when it throws none.
inline std::string error_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const dtlab::Error& e) {
    return e.what();
  }
  return "";
}

// F0 .. F(m-1), then B0 .. B(m-1), on every stage.
inline dtlab::pipeline::StageSchedule gpipe_list(int /*stage*/, int /*stages*/, int m) {
  dtlab::pipeline::StageSchedule list;
  for (int i = 0; i < m; ++i) list.push_back({dtlab::pipeline::StageOp::kForward, i});
  for (int i = 0; i < m; ++i) list.push_back({dtlab::pipeline::StageOp::kBackward, i});
  return list;
}

// A warm-up of min(stages - stage - 1, m) forwards, then a forward and a backward while forwards
// remain, then the remaining backwards.
inline dtlab::pipeline::StageSchedule one_f_one_b_list(int stage, int stages, int m) {
  dtlab::pipeline::StageSchedule list;
  int f = 0, b = 0;
  for (const int warmup = std::min(stages - stage - 1, m); f < warmup;) list.push_back({dtlab::pipeline::StageOp::kForward, f++});
  while (f < m) {
    list.push_back({dtlab::pipeline::StageOp::kForward, f++});
    list.push_back({dtlab::pipeline::StageOp::kBackward, b++});
  }
  while (b < m) list.push_back({dtlab::pipeline::StageOp::kBackward, b++});
  return list;
}

}  // namespace stage_lists
