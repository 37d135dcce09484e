// task2a and task2a-solution: data-parallel fine-tuning with gather/scatter synchronisation.
#include "dtlab/glue/run.h"
#include "dtlab/tasks/task2a.h"

int main(int argc, char** argv) {
  namespace ex = dtlab::task2a;
  dtlab::glue::GlueExercise exercise;
  exercise.name = "task2a";
  exercise.flags = dtlab::glue::GlueMode::kDistributed;
  exercise.data_parallel = {{ex::setup, ex::make_sampler,
                             dtlab::glue::sync_by_hand(ex::broadcast_parameters, ex::sync_gradients)}};
  return dtlab::glue::glue_main(argc, argv, exercise);
}
