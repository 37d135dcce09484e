// cp and cp-solution: GPT-2 with its sequence split over a context x data grid of ranks (lm/run.h,
// cp/cp_trainer.h), every block's attention the student's ring attention (dtlab/tasks/cp.h); and
// the grading aids --probe attention and --probe ring (common/exercises/cp/probe.cpp).
#include "dtlab/cp/cp_trainer.h"
#include "dtlab/lm/run.h"

namespace dtlab::cp {
int run_probe(const lm::LmOptions& options);  // common/exercises/cp/probe.cpp
}

int main(int argc, char** argv) {
  dtlab::lm::LmExercise exercise;
  exercise.name = "cp";
  exercise.context_parallel = dtlab::lm::GridParts{dtlab::cp::make_context_parallel_trainer};
  exercise.probe = dtlab::cp::run_probe;
  return dtlab::lm::lm_main(argc, argv, exercise);
}
