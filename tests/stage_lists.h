// GPipe's and 1F1B's per-stage lists written from their definitions (handouts/pp.md), for the
// tests: the simulator's suite runs them without the pp solution, and pp_schedule_test holds the
// reference builders to them.
#pragma once

#include <algorithm>

#include "dtlab/pipeline/stage_schedule.h"

namespace stage_lists {

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
