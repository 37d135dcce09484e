// tp and tp-solution: GPT-2 tensor parallel, Megatron-style, on a tensor x data grid of ranks
// (lm/run.h, tp/tp_trainer.h), with the student's operators and layers (dtlab/tasks/tp.h).
#include "dtlab/lm/run.h"
#include "dtlab/tp/tp_trainer.h"

int main(int argc, char** argv) {
  dtlab::lm::LmExercise exercise;
  exercise.name = "tp";
  exercise.tensor_parallel = dtlab::lm::GridParts{dtlab::tp::make_tensor_parallel_trainer};
  return dtlab::lm::lm_main(argc, argv, exercise);
}
