// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
// pp, the protocol: what a stage receives and sends around each action of its list
// (dtlab/tasks/pp.h).
#include <utility>
#include <vector>

#include "dtlab/tasks/pp.h"

namespace dtlab::pp {

void run_stage(StageStep& step, const StageSchedule& schedule) {
  // TODO(pp): for each action, receive its input from the neighbour, wait for the previous action's sends, compute it and send the result with send_async; after a backward whose next action is a forward, post that forward's receive before sending the gradient back; wait for the last sends at the end.
  throw dtlab::NotImplemented("TODO(pp): for each action, receive its input from the neighbour, wait for the previous action's sends, compute it and send the result with send_async; after a backward whose next action is a forward, post that forward's receive before sending the gradient back; wait for the last sends at the end.");
}

}  // namespace dtlab::pp
