// The tensor × data grid of ranks, see tp/grid.h.
#include "dtlab/tp/grid.h"

#include <fmt/format.h>

#include "dtlab/core/error.h"
#include "dtlab/dist/subgroup.h"

namespace dtlab::tp {
namespace {

void check_grid(int world_size, int tp, int rank) {
  if (tp < 1) throw Error(fmt::format("tensor parallelism of {} ranks: the TP size must be at least 1", tp));
  if (world_size % tp != 0) {
    throw Error(fmt::format("tensor parallelism of {} does not divide the world of {} ranks: the grid is TP x DP "
                            "ranks, so the world size must be a multiple of the TP size",
                            tp, world_size));
  }
  if (rank < 0 || rank >= world_size) {
    throw Error(fmt::format("rank {} is not in a world of {} ranks", rank, world_size));
  }
}

}  // namespace

std::vector<int> tensor_group_ranks(int world_size, int tp, int rank) {
  check_grid(world_size, tp, rank);
  std::vector<int> ranks;
  for (int t = 0; t < tp; ++t) ranks.push_back(rank / tp * tp + t);
  return ranks;
}

std::vector<int> data_group_ranks(int world_size, int tp, int rank) {
  check_grid(world_size, tp, rank);
  std::vector<int> ranks;
  for (int d = 0; d < world_size / tp; ++d) ranks.push_back(d * tp + rank % tp);
  return ranks;
}

Grid::Grid(dist::Group& world, int tp, const std::string& name) : world_(&world), tp_(tp) {
  const int size = world.size(), rank = world.rank();
  const std::vector<int> tensor_ranks = tensor_group_ranks(size, tp, rank);  // checks before any rank waits
  dp_ = size / tp;
  // Every rank makes its tensor group first, then its data group: a new_group waits for all its
  // members, and with the same order everywhere no rank waits on a group its partner makes later.
  tensor_ = dist::new_group(world, tensor_ranks, fmt::format("{} tensor {}", name, rank / tp));
  data_ = dist::new_group(world, data_group_ranks(size, tp, rank), fmt::format("{} data {}", name, rank % tp));
}

}  // namespace dtlab::tp
