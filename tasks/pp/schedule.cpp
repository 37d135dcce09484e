// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
// pp, the schedules: which forward and which backward each stage runs, in order
// (dtlab/tasks/pp.h).
#include <algorithm>

#include "dtlab/tasks/pp.h"

namespace dtlab::pp {

StageSchedule gpipe_schedule(int stage, int stages, int micro_batches) {
  // TODO(pp): refuse bad arguments, then list every forward in micro-batch order, then every backward in the same order.
  throw dtlab::NotImplemented("TODO(pp): refuse bad arguments, then list every forward in micro-batch order, then every backward in the same order.");
}

StageSchedule one_f_one_b_schedule(int stage, int stages, int micro_batches) {
  // TODO(pp): refuse bad arguments; a warm-up of min(stages - stage - 1, m) forwards, then one forward and one backward while forwards remain, then the remaining backwards.
  throw dtlab::NotImplemented("TODO(pp): refuse bad arguments; a warm-up of min(stages - stage - 1, m) forwards, then one forward and one backward while forwards remain, then the remaining backwards.");
}

}  // namespace dtlab::pp
