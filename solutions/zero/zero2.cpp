// zero, part 3: ZeRO-2, the gradients sharded as backward produces them (dtlab/tasks/zero.h).
#include "dtlab/shard/unit_hooks.h"
#include "dtlab/tasks/zero.h"

namespace dtlab::zero {
namespace {

class Zero2 final : public shard::ShardStrategy {
 public:
  explicit Zero2(const shard::ShardContext& context)
      : c_(context), hooks_(*context.units, [this](shard::ShardUnit& unit) { unit_ready(unit); }) {}

  void before_backward() override { hooks_.arm(); }

  // Called by the kit's hooks, during backward, once every parameter of `unit` has its gradient.
  void unit_ready(shard::ShardUnit& unit) {
    // BEGIN TODO(zero): the unit's gradients end to end, reduce-scattered with your ring, this rank's piece divided by the world size into the unit's shard gradients; then free the unit's whole gradient (release_gradients, and every parameter's grad set to none) so that no rank holds the model's.
    shard::FlatParameters& flat = *unit.flat;
    flat.flatten_gradients();
    ring_reduce_scatter(flat.gradients(), *c_.group, "gradients " + unit.name);
    unit.shard_gradients.copy_(flat.shard(flat.gradients(), c_.group->rank())).div_(c_.group->size());
    flat.release_gradients();
    for (const torch::Tensor& p : flat.parameters()) p.mutable_grad() = torch::Tensor();
    // END TODO
  }

  void after_backward() override { hooks_.expect_every_unit_ready(c_.group->rank()); }


  void after_update() override {
    // BEGIN TODO(zero): as in ZeRO-1, every rank updated only its pieces: all-gather every unit's.
    for (shard::ShardUnit& unit : *c_.units) ring_all_gather(unit.flat->values(), *c_.group, "parameters " + unit.name);
    // END TODO
  }

 private:
  shard::ShardContext c_;
  shard::UnitGradientHooks hooks_;
};

}  // namespace

std::unique_ptr<shard::ShardStrategy> make_zero2(const shard::ShardContext& context) { return std::make_unique<Zero2>(context); }

}  // namespace dtlab::zero
