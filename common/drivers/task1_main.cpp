// task1 and task1-solution: run_glue.py's fine-tuning with the exercise functions of
// tasks/task1 (or solutions/task1) linked in.
#include "dtlab/tasks/task1.h"
#include "dtlab/train/glue_run.h"

int main(int argc, char** argv) {
  dtlab::train::GlueExercise exercise;
  exercise.name = "task1";
  exercise.mode = dtlab::train::GlueMode::kSingle;
  exercise.load_model = dtlab::task1::load_model;
  exercise.train_step = dtlab::task1::train_step;
  exercise.after_epoch = dtlab::task1::after_epoch;
  return dtlab::train::glue_main(argc, argv, exercise);
}
