// precision and precision-solution: GPT-2 data parallel with the student's activation checkpointing,
// bf16 compute copy of fp32 masters and fp16 loss scaler (dtlab/tasks/precision.h), the kit's step
// around them (precision/precision_trainer.h).
#include "dtlab/lm/run.h"
#include "dtlab/precision/precision_trainer.h"

int main(int argc, char** argv) {
  dtlab::lm::LmExercise exercise;
  exercise.name = "precision";
  exercise.precision = dtlab::lm::GridParts{dtlab::precision::make_precision_trainer};
  return dtlab::lm::lm_main(argc, argv, exercise);
}
