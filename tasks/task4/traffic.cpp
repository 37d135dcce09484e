// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
// Task 4: the traffic model of ring all_reduce. dtlab/tasks/task4.h is the specification;
// handouts/task4.md the explanation.
#include "dtlab/core/error.h"
#include "dtlab/tasks/task4.h"

namespace dtlab::task4 {

double ring_allreduce_bytes_per_rank(int64_t bytes, int world) {
  // TODO(task4): return the bytes one rank sends in a ring all_reduce: 2 (world - 1) / world times the tensor's bytes.
  throw dtlab::NotImplemented("TODO(task4): return the bytes one rank sends in a ring all_reduce: 2 (world - 1) / world times the tensor's bytes.");
}

double expected_epoch_bytes_per_rank(const std::vector<dist::CommRecord>& one_iteration,
                                     int64_t iterations, int world) {
  // TODO(task4): add up the ring cost of every all_reduce of one iteration and multiply by the number of iterations.
  throw dtlab::NotImplemented("TODO(task4): add up the ring cost of every all_reduce of one iteration and multiply by the number of iterations.");
}

}  // namespace dtlab::task4
