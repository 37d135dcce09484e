// The tensor x data view of a device mesh, see tp/grid.h.
#include "dtlab/tp/grid.h"

#include <fmt/format.h>

#include "dtlab/core/error.h"

namespace dtlab::tp {
namespace {

// The mesh of a world of `world_size` ranks at TP `tp`, after the checks that name --tp.
mesh::MeshShape grid_shape(int world_size, int tp) {
  if (tp < 1) throw Error(fmt::format("tensor parallelism of {} ranks: the TP size must be at least 1", tp));
  if (world_size % tp != 0) {
    throw Error(fmt::format("tensor parallelism of {} does not divide the world of {} ranks: the grid is TP x DP "
                            "ranks, so the world size must be a multiple of the TP size",
                            tp, world_size));
  }
  return mesh::MeshShape::ordered({{mesh::kData, world_size / tp}, {mesh::kTensor, tp}});
}

}  // namespace

std::vector<int> tensor_group_ranks(int world_size, int tp, int rank) {
  return mesh::MeshLayout(grid_shape(world_size, tp)).group(rank, mesh::kTensor);
}

std::vector<int> data_group_ranks(int world_size, int tp, int rank) {
  return mesh::MeshLayout(grid_shape(world_size, tp)).group(rank, mesh::kData);
}

// The checks come first, on every rank, before any rank waits for a group.
Grid::Grid(dist::Group& world, int tp, const std::string& name) : mesh_(world, grid_shape(world.size(), tp), name) {}

}  // namespace dtlab::tp
