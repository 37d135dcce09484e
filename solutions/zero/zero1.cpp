// zero, part 2: ZeRO-1, the optimiser's state sharded (dtlab/tasks/zero.h).
#include "dtlab/tasks/zero.h"

namespace dtlab::zero {
namespace {

class Zero1 final : public shard::ShardStrategy {
 public:
  explicit Zero1(const shard::ShardContext& context) : c_(context) {}

  void after_backward() override {
    // BEGIN TODO(zero): for each unit, lay its gradients end to end (flatten_gradients), reduce-scatter them with your ring, put this rank's piece, divided by the world size, in the unit's shard gradients, and free the flat copy (release_gradients): only one unit's copy at a time.
    for (shard::ShardUnit& unit : *c_.units) {
      shard::FlatParameters& flat = *unit.flat;
      flat.flatten_gradients();
      ring_reduce_scatter(flat.gradients(), *c_.group, "gradients " + unit.name);
      unit.shard_gradients.copy_(flat.shard(flat.gradients(), c_.group->rank())).div_(c_.group->size());
      flat.release_gradients();
    }
    // END TODO
  }

  void after_update() override {
    // BEGIN TODO(zero): every rank updated only its piece of each unit's flat.values(): all-gather the pieces.
    for (shard::ShardUnit& unit : *c_.units) ring_all_gather(unit.flat->values(), *c_.group, "parameters " + unit.name);
    // END TODO
  }

 private:
  shard::ShardContext c_;
};

}  // namespace

std::unique_ptr<shard::ShardStrategy> make_zero1(const shard::ShardContext& context) { return std::make_unique<Zero1>(context); }

}  // namespace dtlab::zero
