// task2b and task2b-solution: data-parallel fine-tuning with all_reduce synchronisation.
#include "dtlab/glue/run.h"
#include "dtlab/tasks/task2b.h"

int main(int argc, char** argv) {
  namespace ex = dtlab::task2b;
  dtlab::glue::GlueExercise exercise;
  exercise.name = "task2b";
  exercise.flags = dtlab::glue::GlueMode::kDistributed;
  exercise.data_parallel = {{ex::setup, ex::make_sampler,
                             dtlab::glue::sync_by_hand(ex::broadcast_parameters, ex::sync_gradients)}};
  return dtlab::glue::glue_main(argc, argv, exercise);
}
