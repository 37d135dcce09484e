// task1 and task1-solution: run_glue.py's fine-tuning with the exercise functions of
// tasks/task1 (or solutions/task1) linked in.
#include "dtlab/glue/run.h"
#include "dtlab/tasks/task1.h"

int main(int argc, char** argv) {
  dtlab::glue::GlueExercise exercise;
  exercise.name = "task1";
  exercise.flags = dtlab::glue::GlueMode::kSingle;
  exercise.own = {dtlab::task1::load_model, dtlab::task1::train_step, dtlab::task1::after_epoch};
  return dtlab::glue::glue_main(argc, argv, exercise);
}
