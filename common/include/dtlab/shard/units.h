// Note [Shard units]: the model cut into units, each its own flat buffer (Note [Flat parameters])
// cut into world-size pieces, rank r owning piece r of every unit. ZeRO-1 needs one unit (the whole
// model); ZeRO-2 reduces a unit's gradient as soon as backward has produced it (its buckets); FSDP
// gathers a unit's parameters just before it computes and frees them after (PyTorch FSDP's
// FlatParameter per wrapped module). One layout serves the three, so every stage's AdamW, clipping
// and checkpoints are the same code.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dtlab/shard/flat_parameters.h"

namespace dtlab::shard {

struct ShardUnit {
  std::string name;                     // "model", "transformer.h.3", ...
  std::unique_ptr<FlatParameters> flat;  // the unit's parameters are views of flat->values()
  torch::Tensor shard_gradients;        // [shard_numel]: this rank's piece of the averaged gradient
  // [shard_numel]: this rank's piece of the parameters, what the optimiser updates. A view of
  // flat->values() (ZeRO-1 and 2: the all-gather reads it in place), or after keep_only_pieces
  // (FSDP) a tensor of its own, the only copy of the piece while the unit is freed.
  torch::Tensor shard_values;
};

// Which unit a parameter (by its module name) belongs to. Units keep the order in which their
// first parameter appears in named_parameters (the forward order, for the models of the kit).
using UnitOf = std::function<std::string(const std::string& parameter)>;
std::string whole_model(const std::string& parameter);  // one unit, "model"

// Each unit's buffer holds the module's current values (rank 0's, broadcast before).
std::vector<ShardUnit> make_units(torch::nn::Module& module, int world, int rank, const UnitOf& unit_of = whole_model);

// FSDP's state at rest: each unit keeps only this rank's piece (shard_values becomes a copy) and
// gives back the memory of the whole (FlatParameters::free_values). Before the optimiser is made.
void keep_only_pieces(std::vector<ShardUnit>& units, int rank);

// Note [Reading only what a rank keeps]: fills this rank's pieces (shard_values) from a source of
// parameter values, reading only the elements each piece holds: read(i, begin, into) puts elements
// [begin, begin + into.numel()) of source parameter i (flattened) into `into`. sources name the
// module's parameters (as make_units saw them), in the order they are to be written (a later one
// wins where two fill the same parameter); a name that no unit holds is an error. Returns the
// elements read.
struct PieceSource {
  std::string parameter;
  std::function<void(int64_t begin, torch::Tensor into)> read;
};
int64_t fill_pieces(std::vector<ShardUnit>& units, int rank, const std::vector<PieceSource>& sources);

}  // namespace dtlab::shard
