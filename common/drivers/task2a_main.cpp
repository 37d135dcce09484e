// task2a and task2a-solution: data-parallel fine-tuning with gather/scatter synchronisation.
#include "dtlab/tasks/task2a.h"
#include "dtlab/train/glue_run.h"

int main(int argc, char** argv) {
  dtlab::train::GlueExercise exercise;
  exercise.name = "task2a";
  exercise.mode = dtlab::train::GlueMode::kDistributed;
  exercise.setup = dtlab::task2a::setup;
  exercise.make_sampler = dtlab::task2a::make_sampler;
  exercise.broadcast_parameters = dtlab::task2a::broadcast_parameters;
  exercise.sync_gradients = dtlab::task2a::sync_gradients;
  return dtlab::train::glue_main(argc, argv, exercise);
}
