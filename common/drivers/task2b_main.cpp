// task2b and task2b-solution: data-parallel fine-tuning with all_reduce synchronisation.
#include "dtlab/tasks/task2b.h"
#include "dtlab/train/glue_run.h"

int main(int argc, char** argv) {
  dtlab::train::GlueExercise exercise;
  exercise.name = "task2b";
  exercise.mode = dtlab::train::GlueMode::kDistributed;
  exercise.setup = dtlab::task2b::setup;
  exercise.make_sampler = dtlab::task2b::make_sampler;
  exercise.broadcast_parameters = dtlab::task2b::broadcast_parameters;
  exercise.sync_gradients = dtlab::task2b::sync_gradients;
  return dtlab::train::glue_main(argc, argv, exercise);
}
