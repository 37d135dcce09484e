// task3 and task3-solution: data-parallel fine-tuning with DistributedDataParallel.
#include "dtlab/glue/run.h"
#include "dtlab/tasks/task3.h"

int main(int argc, char** argv) {
  namespace ex = dtlab::task3;
  dtlab::glue::GlueExercise exercise;
  exercise.name = "task3";
  exercise.flags = dtlab::glue::GlueMode::kDdp;
  exercise.data_parallel = {{ex::setup, ex::make_sampler, dtlab::glue::sync_by_ddp(ex::wrap_model)}};
  return dtlab::glue::glue_main(argc, argv, exercise);
}
