// zero, part 4: FSDP (ZeRO-3), the parameters sharded at rest (dtlab/tasks/zero.h).
#include "dtlab/shard/unit_hooks.h"
#include "dtlab/tasks/zero.h"

namespace dtlab::zero {
namespace {

class Fsdp final : public shard::ShardStrategy {
 public:
  explicit Fsdp(const shard::ShardContext& context)
      : c_(context),
        hooks_(*context.units, [this](shard::ShardUnit& unit) { unit_ready(unit); }),
        gathered_(context.units->size(), false),
        last_stage_(context.units->size(), -1) {
    // The last stage of the forward that reads each unit: freed after it (the tied embeddings
    // stay until the head has used them).
    for (size_t s = 0; s < c_.stage_units.size(); ++s) {
      for (size_t u : c_.stage_units[s]) last_stage_[u] = static_cast<int64_t>(s);
    }
  }

  void before_stage(int64_t stage) override {
    // BEGIN TODO(zero): gather every unit this stage reads (unless it is gathered already).
    for (size_t u : c_.stage_units[static_cast<size_t>(stage)]) gather(u);
    // END TODO
  }

  void after_stage(int64_t stage, const torch::Tensor& output) override {
    // BEGIN TODO(zero): free the units no later stage of the forward reads; and when the output takes part in backward, hang a hook on it that gathers this stage's units again before the stage's backward runs.
    const std::vector<size_t>& units = c_.stage_units[static_cast<size_t>(stage)];
    for (size_t u : units) {
      if (last_stage_[u] == stage) release(u);
    }
    if (output.requires_grad()) {
      // The gradient of a stage's output is computed just before the stage's own backward.
      output.register_hook([this, units](const torch::Tensor& grad) {
        for (size_t u : units) gather(u);
        return grad;
      });
    }
    // END TODO
  }

  void before_backward() override { hooks_.arm(); }

  // Called by the kit's hooks, during backward, once every parameter of `unit` has its gradient.
  void unit_ready(shard::ShardUnit& unit) {
    // BEGIN TODO(zero): as ZeRO-2, reduce-scatter the unit's gradient into its shard gradients (averaged) and free it; then free the unit's parameters too.
    shard::FlatParameters& flat = *unit.flat;
    flat.flatten_gradients();
    ring_reduce_scatter(flat.gradients(), *c_.group, "gradients " + unit.name);
    unit.shard_gradients.copy_(flat.shard(flat.gradients(), c_.group->rank())).div_(c_.group->size());
    flat.release_gradients();
    for (const torch::Tensor& p : flat.parameters()) p.mutable_grad() = torch::Tensor();
    release(static_cast<size_t>(&unit - c_.units->data()));
    // END TODO
  }

  void after_backward() override { hooks_.expect_every_unit_ready(c_.group->rank()); }


  // The optimiser updated each unit's shard_values, the only copy at rest: nothing to gather.
  void after_update() override {}

 private:
  // The unit whole on this rank: its memory back, this rank's piece in place, the others' pieces
  // gathered around the ring.
  void gather(size_t u) {
    if (gathered_[u]) return;
    // BEGIN TODO(zero): allocate the unit's values, copy this rank's piece (shard_values) into its place, and all-gather with your ring.
    shard::ShardUnit& unit = (*c_.units)[u];
    unit.flat->allocate_values();
    unit.flat->shard(unit.flat->values(), c_.group->rank()).copy_(unit.shard_values);
    ring_all_gather(unit.flat->values(), *c_.group, "parameters " + unit.name);
    // END TODO
    gathered_[u] = true;
  }

  void release(size_t u) {
    if (!gathered_[u]) return;
    (*c_.units)[u].flat->free_values();
    gathered_[u] = false;
  }

  shard::ShardContext c_;
  shard::UnitGradientHooks hooks_;
  std::vector<bool> gathered_;
  std::vector<int64_t> last_stage_;
};

}  // namespace

std::unique_ptr<shard::ShardStrategy> make_fsdp(const shard::ShardContext& context) { return std::make_unique<Fsdp>(context); }

}  // namespace dtlab::zero
