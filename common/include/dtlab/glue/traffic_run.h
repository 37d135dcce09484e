// Task 4's driver: data-parallel training with the kit's DDP at several global batch sizes,
// every all_reduce recorded, the network interface's counters read before and after, and the
// exercise's traffic model compared with the measurement.
#pragma once

#include <functional>
#include <vector>

#include "dtlab/dist/group.h"

namespace dtlab::glue {

struct TrafficModel {
  std::function<double(const std::vector<dist::CommRecord>&, int64_t, int)> expected_epoch_bytes_per_rank;
};

// main() of task4: run_glue's flags and the launch flags, plus --batch_sizes (default 64,32,16)
// and --interface. Writes OUTPUT_DIR/results.json with a "traffic" section and prints a table
// of expected and measured bytes with their ratio.
int traffic_main(int argc, char** argv, const std::string& name, const TrafficModel& model);

}  // namespace dtlab::glue
