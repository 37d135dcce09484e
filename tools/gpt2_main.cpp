// dtlab-gpt2: the kit's own single-process GPT-2 translation run (lm/run.h) on the kit's parts
// and no student code: the reference the data- and pipeline-parallel exercises compare with,
// and `make gpt2-demo`.
#include "dtlab/lm/run.h"

int main(int argc, char** argv) {
  dtlab::lm::LmExercise exercise;
  exercise.name = "gpt2";  // no data_parallel part: one process
  return dtlab::lm::lm_main(argc, argv, exercise);
}
