// task3 and task3-solution: data-parallel fine-tuning with DistributedDataParallel.
#include "dtlab/tasks/task3.h"
#include "dtlab/train/glue_run.h"

int main(int argc, char** argv) {
  dtlab::train::GlueExercise exercise;
  exercise.name = "task3";
  exercise.mode = dtlab::train::GlueMode::kDdp;
  exercise.setup = dtlab::task3::setup;
  exercise.make_sampler = dtlab::task3::make_sampler;
  exercise.wrap_model = dtlab::task3::wrap_model;
  return dtlab::train::glue_main(argc, argv, exercise);
}
