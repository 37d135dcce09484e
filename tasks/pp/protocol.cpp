// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
// pp, the protocol: what a stage receives and sends around each action of its list
// (dtlab/tasks/pp.h).
#include <vector>

#include "dtlab/tasks/pp.h"

namespace dtlab::pp {

void run_stage(StageStep& step, const StageSchedule& schedule) {
  // TODO(pp): for each action, receive its input from the neighbour (blocking), compute it, and send the result with send_async, keeping the PendingWork; wait for every send at the end.
  throw dtlab::NotImplemented("TODO(pp): for each action, receive its input from the neighbour (blocking), compute it, and send the result with send_async, keeping the PendingWork; wait for every send at the end.");
}

}  // namespace dtlab::pp
