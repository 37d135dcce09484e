// dtlab-reference: the kit's own single-process fine-tuning (the kit's model loading, training
// step and evaluation; no student code). The grader compares every exercise with it.
#include "dtlab/train/glue_run.h"

int main(int argc, char** argv) {
  dtlab::train::GlueExercise exercise;
  exercise.name = "reference";
  exercise.mode = dtlab::train::GlueMode::kSingle;  // load_model, train_step, after_epoch: the kit's
  return dtlab::train::glue_main(argc, argv, exercise);
}
