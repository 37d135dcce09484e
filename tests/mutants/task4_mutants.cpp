// Deliberately broken task 4 solutions, chosen at run time by DTLAB_MUTANT (unset: correct,
// solutions/task4's code). grader_mutants_test grades each and expects the check that should
// catch it to fail with the right words. Test code: never part of a student release.
#include <cstdlib>
#include <string>

#include "dtlab/tasks/task4.h"

namespace dtlab::task4 {
namespace {

bool mutant(const char* name) {
  const char* m = std::getenv("DTLAB_MUTANT");
  return m && std::string(m) == name;
}

}  // namespace

double ring_allreduce_bytes_per_rank(int64_t bytes, int world) {
  // whole_tensor_twice: the ring's two passes counted as the whole tensor each, (world - 1) /
  // world left out: 4/3 of the bytes at 4 ranks, the smallest mistake of the formula's factors,
  // which the measured check must catch from the interface's counters alone (Note [What each
  // tolerance must catch], grader/checks.h).
  if (mutant("whole_tensor_twice")) return world > 1 ? 2.0 * double(bytes) : 0.0;
  return 2.0 * double(world - 1) / double(world) * double(bytes);
}

double expected_epoch_bytes_per_rank(const std::vector<dist::CommRecord>& one_iteration,
                                     int64_t iterations, int world) {
  double per_iteration = 0;
  for (const dist::CommRecord& r : one_iteration) per_iteration += ring_allreduce_bytes_per_rank(r.bytes, world);
  return per_iteration * double(iterations);
}

}  // namespace dtlab::task4
