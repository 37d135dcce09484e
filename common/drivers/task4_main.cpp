// task4 and task4-solution: traffic of data-parallel training, expected vs measured.
#include "dtlab/glue/traffic_run.h"
#include "dtlab/tasks/task4.h"

int main(int argc, char** argv) {
  return dtlab::glue::traffic_main(argc, argv, "task4", {dtlab::task4::expected_epoch_bytes_per_rank});
}
