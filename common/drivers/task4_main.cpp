// task4 and task4-solution: traffic of data-parallel training, expected vs measured.
#include "dtlab/tasks/task4.h"
#include "dtlab/train/traffic_run.h"

int main(int argc, char** argv) {
  return dtlab::train::traffic_main(argc, argv, "task4", {dtlab::task4::expected_epoch_bytes_per_rank});
}
