// Task 4: the traffic model of ring all_reduce. dtlab/tasks/task4.h is the specification;
// handouts/task4.md the explanation.
#include "dtlab/core/error.h"
#include "dtlab/tasks/task4.h"

namespace dtlab::task4 {

double ring_allreduce_bytes_per_rank(int64_t bytes, int world) {
  // BEGIN TODO(task4): return the bytes one rank sends in a ring all_reduce: 2 (world - 1) / world times the tensor's bytes.
  return 2.0 * double(world - 1) / double(world) * double(bytes);
  // END TODO
}

double expected_epoch_bytes_per_rank(const std::vector<dist::CommRecord>& one_iteration,
                                     int64_t iterations, int world) {
  // BEGIN TODO(task4): add up the ring cost of every all_reduce of one iteration and multiply by the number of iterations.
  double per_iteration = 0;
  for (const dist::CommRecord& r : one_iteration) per_iteration += ring_allreduce_bytes_per_rank(r.bytes, world);
  return per_iteration * double(iterations);
  // END TODO
}

}  // namespace dtlab::task4
