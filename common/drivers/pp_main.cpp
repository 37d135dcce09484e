// pp and pp-solution: GPT-2 pipeline parallel with one rank per stage (lm/run.h, pipeline/stage_ranks.h),
// with the student's schedules and protocol (dtlab/tasks/pp.h).
#include "dtlab/lm/run.h"
#include "dtlab/tasks/pp.h"

namespace dtlab::pp {
int run_probe(const lm::LmOptions& options);  // common/exercises/pp/probe.cpp
}

int main(int argc, char** argv) {
  namespace pp = dtlab::pp;
  dtlab::lm::LmExercise exercise;
  exercise.name = "pp";
  exercise.stage_ranks = dtlab::pipeline::StageRankParts{pp::gpipe_schedule, pp::one_f_one_b_schedule, pp::run_stage,
                                                        pp::run_probe};
  return dtlab::lm::lm_main(argc, argv, exercise);
}
