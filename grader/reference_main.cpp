// dtlab-reference: the kit's own single-process fine-tuning (the kit's model loading, training
// step and evaluation; no student code). The grader compares every exercise with it.
#include "dtlab/glue/run.h"

int main(int argc, char** argv) {
  dtlab::glue::GlueExercise exercise;
  exercise.name = "reference";
  exercise.flags = dtlab::glue::GlueMode::kSingle;  // exercise.own left empty: the kit's parts
  return dtlab::glue::glue_main(argc, argv, exercise);
}
