// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
// zero, part 2: ZeRO-1, the optimiser's state sharded (dtlab/tasks/zero.h).
#include "dtlab/tasks/zero.h"

namespace dtlab::zero {
namespace {

class Zero1 final : public shard::ShardStrategy {
 public:
  explicit Zero1(const shard::ShardContext& context) : c_(context) {}

  void after_backward() override {
    // TODO(zero): for each unit, lay its gradients end to end (flatten_gradients), reduce-scatter them with your ring, put this rank's piece, divided by the world size, in the unit's shard gradients, and free the flat copy (release_gradients): only one unit's copy at a time.
    throw dtlab::NotImplemented("TODO(zero): for each unit, lay its gradients end to end (flatten_gradients), reduce-scatter them with your ring, put this rank's piece, divided by the world size, in the unit's shard gradients, and free the flat copy (release_gradients): only one unit's copy at a time.");
  }

  void after_update() override {
    // TODO(zero): every rank updated only its piece of each unit's flat.values(): all-gather the pieces.
    throw dtlab::NotImplemented("TODO(zero): every rank updated only its piece of each unit's flat.values(): all-gather the pieces.");
  }

 private:
  shard::ShardContext c_;
};

}  // namespace

std::unique_ptr<shard::ShardStrategy> make_zero1(const shard::ShardContext& context) { return std::make_unique<Zero1>(context); }

}  // namespace dtlab::zero
