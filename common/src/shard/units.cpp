// A model cut into units, see shard/units.h.
#include "dtlab/shard/units.h"

#include <map>
#include <utility>

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
  }
  return units;
}

void keep_only_pieces(std::vector<ShardUnit>& units, int rank) {
  for (ShardUnit& unit : units) {
    unit.shard_values = unit.flat->shard(unit.flat->values(), rank).clone();
    unit.flat->free_values();
  }
}

}  // namespace dtlab::shard
