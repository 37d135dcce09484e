// Deliberately broken zero solutions, one per mistake students make, chosen at run time by
// DTLAB_MUTANT (unset: correct, solutions/zero's code). grader_mutants_test grades each and
// expects the check that should catch it to fail with the right words. Test code: never part of
// a student release.
#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "dtlab/core/error.h"
#include "dtlab/dist/ring_step.h"
#include "dtlab/shard/unit_hooks.h"
#include "dtlab/tasks/zero.h"

namespace dtlab::zero {
namespace {

bool mutant(const char* name) {
  const char* m = std::getenv("DTLAB_MUTANT");
  return m && std::string(m) == name;
}

// Piece k of flat. piece_off_by_one: every piece but the first starts one element early (a shard
// boundary off by one), so neighbouring pieces overlap by one element and the last one is short of
// the end.
torch::Tensor piece(torch::Tensor& flat, int k, int world) {
  const int64_t size = flat.numel() / world;
  const int64_t index = ((k % world) + world) % world;
  const int64_t shift = mutant("piece_off_by_one") && index > 0 ? 1 : 0;
  return flat.narrow(0, index * size - shift, size);
}

// This rank's piece of the unit's gradient, averaged (sum_not_average: summed only), into its
// shard gradients.
void reduce_unit(shard::ShardUnit& unit, dist::Group& group) {
  if (mutant("does_nothing")) return;  // no reduction at all: the optimiser steps on zeros
  shard::FlatParameters& flat = *unit.flat;
  flat.flatten_gradients();
  // c10d_all_reduce: the whole gradient all-reduced (DDP's collective), this rank's piece taken:
  // right in every number, half the ring's sends.
  if (mutant("c10d_all_reduce")) {
    group.all_reduce(flat.gradients(), dist::ReduceOp::SUM, "gradients " + unit.name);
  } else {
    ring_reduce_scatter(flat.gradients(), group, "gradients " + unit.name);
  }
  unit.shard_gradients.copy_(flat.shard(flat.gradients(), group.rank()));
  if (!mutant("sum_not_average")) unit.shard_gradients.div_(group.size());
}

void free_gradient(shard::ShardUnit& unit) {
  if (mutant("keeps_gradients")) return;  // ZeRO-2 that reduces but never frees
  unit.flat->release_gradients();
  for (const torch::Tensor& p : unit.flat->parameters()) p.mutable_grad() = torch::Tensor();
}

void gather_all(const shard::ShardContext& c) {
  if (mutant("no_all_gather") || mutant("does_nothing")) return;  // each rank keeps only its own pieces' updates
  for (shard::ShardUnit& unit : *c.units) ring_all_gather(unit.flat->values(), *c.group, "parameters " + unit.name);
  // smallest_unit_twice: the smallest unit (GPT-2's head) all-gathered once more, right in every
  // number: the smallest mistake the traffic check must catch (Note [The traffic's tolerance]).
  if (mutant("smallest_unit_twice")) {
    shard::ShardUnit* smallest = &c.units->front();
    for (shard::ShardUnit& unit : *c.units) {
      if (unit.flat->layout().padded_numel() < smallest->flat->layout().padded_numel()) smallest = &unit;
    }
    ring_all_gather(smallest->flat->values(), *c.group, "parameters " + smallest->name + " again");
  }
}

class Zero1 final : public shard::ShardStrategy {
 public:
  explicit Zero1(const shard::ShardContext& context) : c_(context) {}
  void after_backward() override {
    for (shard::ShardUnit& unit : *c_.units) {
      reduce_unit(unit, *c_.group);
      unit.flat->release_gradients();
    }
  }
  void after_update() override { gather_all(c_); }

 private:
  shard::ShardContext c_;
};

class Zero2 final : public shard::ShardStrategy {
 public:
  explicit Zero2(const shard::ShardContext& context)
      : c_(context), hooks_(*context.units, [this](shard::ShardUnit& unit) {
          reduce_unit(unit, *c_.group);
          free_gradient(unit);
        }) {}
  void before_backward() override { hooks_.arm(); }
  void after_backward() override { hooks_.expect_every_unit_ready(c_.group->rank()); }
  void after_update() override { gather_all(c_); }

 private:
  shard::ShardContext c_;
  shard::UnitGradientHooks hooks_;
};

class Fsdp final : public shard::ShardStrategy {
 public:
  explicit Fsdp(const shard::ShardContext& context)
      : c_(context),
        hooks_(*context.units, [this](shard::ShardUnit& unit) { unit_ready(unit); }),
        gathered_(context.units->size(), false),
        last_stage_(context.units->size(), -1) {
    for (size_t s = 0; s < c_.stage_units.size(); ++s) {
      for (size_t u : c_.stage_units[s]) last_stage_[u] = static_cast<int64_t>(s);
    }
  }
  void before_stage(int64_t stage) override {
    for (size_t u : c_.stage_units[static_cast<size_t>(stage)]) gather(u);
  }
  void after_stage(int64_t stage, const torch::Tensor& output) override {
    const std::vector<size_t>& units = c_.stage_units[static_cast<size_t>(stage)];
    // freed_two_stages_late: a unit freed two stages after the last that reads it, so three blocks
    // are whole at once: the smallest mistake the memory check's bound must catch (Note [A shape
    // where the bound bites] in grader/checks_zero.cpp); right in every loss and byte sent.
    if (mutant("freed_two_stages_late")) {
      for (size_t u = 0; u < last_stage_.size(); ++u) {
        if (last_stage_[u] == stage - 2) release(u);
      }
    } else {
      for (size_t u : units) {
        if (last_stage_[u] == stage || mutant("freed_before_backward")) release(u);
      }
    }
    // freed_before_backward: nothing gathers a unit again before its backward, which reads it.
    if (output.requires_grad() && !mutant("freed_before_backward")) {
      output.register_hook([this, units](const torch::Tensor& grad) {
        for (size_t u : units) gather(u);
        return grad;
      });
    }
  }
  void before_backward() override {
    hooks_.arm();
    // gathers_all_before_backward: right in every number and in its traffic (the output hooks
    // find every unit gathered), but backward holds the whole model's parameters.
    if (mutant("gathers_all_before_backward")) {
      for (size_t u = 0; u < c_.units->size(); ++u) gather(u);
    }
  }
  void unit_ready(shard::ShardUnit& unit) {
    reduce_unit(unit, *c_.group);
    free_gradient(unit);
    release(static_cast<size_t>(&unit - c_.units->data()));
  }
  void after_backward() override { hooks_.expect_every_unit_ready(c_.group->rank()); }
  void after_update() override {}

 private:
  void gather(size_t u) {
    // gathers_again: a unit gathered whenever a stage reads it, even while it is whole.
    if (gathered_[u] && !mutant("gathers_again")) return;
    shard::ShardUnit& unit = (*c_.units)[u];
    unit.flat->allocate_values();
    unit.flat->shard(unit.flat->values(), c_.group->rank()).copy_(unit.shard_values);
    ring_all_gather(unit.flat->values(), *c_.group, "parameters " + unit.name);
    gathered_[u] = true;
  }
  void release(size_t u) {
    if (!gathered_[u] || mutant("never_frees")) return;
    (*c_.units)[u].flat->free_values();
    gathered_[u] = false;
  }

  shard::ShardContext c_;
  shard::UnitGradientHooks hooks_;
  std::vector<bool> gathered_;
  std::vector<int64_t> last_stage_;
};

}  // namespace

void ring_reduce_scatter(torch::Tensor& flat, dist::Group& group, const std::string& tag) {
  if (flat.dim() != 1 || flat.numel() % group.size() != 0) throw Error("ring_reduce_scatter: not cut into pieces");
  if (group.size() == 1) return;
  const int world = group.size(), rank = group.rank();
  torch::Tensor incoming = torch::empty_like(piece(flat, 0, world));
  // ring_one_step_off: every index one step on, so the full sum ends in piece rank + 1, not in
  // this rank's piece (whose projection on the right gradient happens to be near 1/N).
  const int off = mutant("ring_one_step_off") ? 1 : 0;
  for (int s = 0; s < world - 1; ++s) {
    dist::ring_step_async(piece(flat, rank - s - 1 + off, world), incoming, group, tag).wait();
    piece(flat, rank - s - 2 + off, world).add_(incoming);
  }
}

void ring_all_gather(torch::Tensor& flat, dist::Group& group, const std::string& tag) {
  if (flat.dim() != 1 || flat.numel() % group.size() != 0) throw Error("ring_all_gather: not cut into pieces");
  if (group.size() == 1) return;
  const int world = group.size(), rank = group.rank();
  // gather_wrong_slots: the piece received at step s (rank - s - 1's) written into slot
  // rank + s + 1, the same slot at 2 ranks and another one from 3 on. The other ranks' slots
  // are zeroed first, as in a buffer made with zeros: what the wrong slots then hold does not
  // depend on what the allocator left in a freed unit's memory (which can be the right values).
  const int sign = mutant("gather_wrong_slots") ? 1 : -1;
  if (mutant("gather_wrong_slots")) {
    for (int k = 1; k < world; ++k) piece(flat, rank + k, world).zero_();
  }
  for (int s = 0; s < world - 1; ++s) {
    torch::Tensor into = piece(flat, rank + sign * (s + 1), world);
    dist::ring_step_async(piece(flat, rank - s, world), into, group, tag).wait();
  }
}

std::unique_ptr<shard::ShardStrategy> make_zero1(const shard::ShardContext& context) { return std::make_unique<Zero1>(context); }
std::unique_ptr<shard::ShardStrategy> make_zero2(const shard::ShardContext& context) { return std::make_unique<Zero2>(context); }
std::unique_ptr<shard::ShardStrategy> make_fsdp(const shard::ShardContext& context) { return std::make_unique<Fsdp>(context); }

}  // namespace dtlab::zero
