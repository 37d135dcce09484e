// A model cut into units, see shard/units.h.
#include "dtlab/shard/units.h"

#include <torch/utils.h>

#include <algorithm>
#include <map>
#include <utility>

#include "dtlab/core/error.h"
#include "dtlab/report/process_memory.h"

namespace dtlab::shard {

std::string whole_model(const std::string&) { return "model"; }

std::vector<ShardUnit> make_units(torch::nn::Module& module, int world, int rank, const UnitOf& unit_of) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::pair<std::string, torch::Tensor>>> members;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    const std::string unit = unit_of(item.key());
    if (!members.count(unit)) order.push_back(unit);
    members[unit].emplace_back(item.key(), item.value());
  }
  std::vector<ShardUnit> units;
  for (const std::string& name : order) {
    ShardUnit unit;
    unit.name = name;
    unit.flat = std::make_unique<FlatParameters>(members[name], world);
    unit.shard_gradients = torch::zeros({unit.flat->layout().shard_numel()}, unit.flat->values().options());
    unit.shard_values = unit.flat->shard(unit.flat->values(), rank);
    units.push_back(std::move(unit));
    // The unit's own tensors were freed as its buffer took their place: to the kernel now, so
    // that loading holds the model and one unit's buffer, not every freed tensor besides
    // (shard::load_peak_bytes; Note [Memory a rank holds]).
    report::give_back_free_heap();
  }
  return units;
}

int64_t fill_pieces(std::vector<ShardUnit>& units, int rank, const std::vector<PieceSource>& sources) {
  torch::NoGradGuard no_grad;
  int64_t read = 0;
  for (const PieceSource& source : sources) {
    bool found = false;
    for (ShardUnit& unit : units) {
      const ShardLayout& layout = unit.flat->layout();
      const int64_t begin = layout.begin(rank), end = begin + layout.shard_numel();
      for (const FlatSegment& s : unit.flat->segments()) {
        if (s.name != source.parameter) continue;
        found = true;
        const int64_t from = std::max(begin, s.offset), to = std::min(end, s.offset + s.numel);
        if (from >= to) continue;  // none of this parameter is in this rank's piece
        source.read(from - s.offset, unit.shard_values.narrow(0, from - begin, to - from));
        read += to - from;
      }
    }
    if (!found) throw Error("fill_pieces: no unit holds " + source.parameter + " (a bug of the kit's units)");
  }
  return read;
}

void keep_only_pieces(std::vector<ShardUnit>& units, int rank) {
  for (ShardUnit& unit : units) {
    unit.shard_values = unit.flat->shard(unit.flat->values(), rank).clone();
    unit.flat->free_values();
    report::give_back_free_heap();
  }
}

}  // namespace dtlab::shard
