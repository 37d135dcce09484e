// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
// mesh, part 1: the layout of a device mesh (dtlab/tasks/mesh.h).
#include <fmt/format.h>

#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/tasks/mesh.h"

namespace dtlab::mesh {
namespace {

[[maybe_unused]] int world_of(const std::vector<int>& sizes) {
  int world = 1;
  for (const int s : sizes) world *= s;
  return world;
}

}  // namespace

std::vector<int> coordinates_of(int rank, const std::vector<int>& sizes) {
  const int world = world_of(sizes);
  if (rank < 0 || rank >= world) {
    throw Error(fmt::format("rank {} is not in a mesh of {} ranks ({})", rank, world, fmt::join(sizes, " x ")));
  }
  // TODO(mesh): the rank's digits in the mixed radix of sizes, the last axis the fastest: peel them off from the last axis to the first (coordinate = rest % size, rest = rest / size).
  throw dtlab::NotImplemented("TODO(mesh): the rank's digits in the mixed radix of sizes, the last axis the fastest: peel them off from the last axis to the first (coordinate = rest % size, rest = rest / size).");
}

std::vector<int> group_of(int rank, int axis, const std::vector<int>& sizes) {
  if (axis < 0 || axis >= static_cast<int>(sizes.size())) {
    throw Error(fmt::format("axis {} is not one of the mesh's {} axes", axis, sizes.size()));
  }
  // TODO(mesh): keep rank's coordinates, set the coordinate on axis to 0, 1, ..., size - 1 in turn, and give each its world rank (the stride of an axis is the product of the sizes after it).
  throw dtlab::NotImplemented("TODO(mesh): keep rank's coordinates, set the coordinate on axis to 0, 1, ..., size - 1 in turn, and give each its world rank (the stride of an axis is the product of the sizes after it).");
}

}  // namespace dtlab::mesh
