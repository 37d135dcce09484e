// Sub-groups, see dist/subgroup.h.
#include "dtlab/dist/subgroup.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "dtlab/dist/detail/c10d.h"

namespace dtlab::dist {

std::unique_ptr<Group> new_group(Group& world, const std::vector<int>& ranks, const std::string& name) {
  Group::State& w = world.state();
  const std::string what = fmt::format("new_group \"{}\" of ranks [{}]", name, fmt::join(ranks, ", "));
  if (name.empty()) throw Error(what + ": a sub-group needs a name (its ranks meet under it)");
  std::set<int> seen;
  for (int r : ranks) {
    if (r < 0 || r >= w.size) throw Error(fmt::format("{}: rank {} does not exist (world size {})", what, r, w.size));
    if (!seen.insert(r).second) throw Error(fmt::format("{}: rank {} is listed twice", what, r));
  }
  const auto me = std::find(ranks.begin(), ranks.end(), w.rank);
  if (me == ranks.end()) {
    throw Error(fmt::format("{}: called by rank {}, which is not in it (only its members call new_group)", what, w.rank));
  }
  if (!w.make_backend) throw Error(what + ": this group was made without a way to make sub-groups");
  const int rank = static_cast<int>(me - ranks.begin());
  const int size = static_cast<int>(ranks.size());
  c10::intrusive_ptr<C10dBackend> pg;
  try {
    pg = w.make_backend("dtlab/subgroup/" + name + "/", rank, size);
  } catch (const DistError&) {
    throw;
  } catch (const std::exception& e) {
    throw DistError(fmt::format("{}: {}: cannot connect its process group: {}", rank_name(w), what, what_of(e)));
  }
  std::unique_ptr<Group> group = wrap_process_group(std::move(pg), rank, size, w.timeout, w.backend, w.local_rank,
                                                    w.local_world_size, w.ranks_on_this_machine);
  Group::State& g = group->state();
  g.device = w.device;
  g.name = name;
  for (int r : ranks) g.world_ranks.push_back(w.world_ranks.empty() ? r : w.world_ranks.at(static_cast<size_t>(r)));
  g.check_collectives = w.check_collectives;
  return group;
}

}  // namespace dtlab::dist
