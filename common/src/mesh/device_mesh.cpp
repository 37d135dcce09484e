// A device mesh's groups, see mesh/device_mesh.h.
#include "dtlab/mesh/device_mesh.h"

#include <fmt/format.h>

#include "dtlab/core/error.h"
#include "dtlab/dist/subgroup.h"

namespace dtlab::mesh {
namespace {

MeshLayout checked_layout(const dist::Group& world, MeshShape shape) {
  if (shape.world() != world.size()) {
    throw Error(fmt::format("the device mesh {} holds {} ranks, the world {}: the axes' sizes must multiply to the "
                            "world size",
                            shape.describe(), shape.world(), world.size()));
  }
  return MeshLayout(std::move(shape));
}

}  // namespace

DeviceMesh::DeviceMesh(dist::Group& world, MeshShape shape, const std::string& name)
    : world_(&world), layout_(checked_layout(world, std::move(shape))) {
  for (const Axis& axis : layout_.shape().axes()) {
    const std::vector<int> members = layout_.group(rank(), axis.name);
    if (axis.size == world.size()) {  // the world's ranks in the world's order (the one axis of size N)
      groups_[axis.name] = &world;
      continue;
    }
    // The group's name: its axis and its first member, the same on every member.
    made_.push_back(dist::new_group(world, members, fmt::format("{} {} {}", name, axis.name, members.front())));
    groups_[axis.name] = made_.back().get();
  }
}

dist::Group& DeviceMesh::group(const std::string& axis) {
  const auto found = groups_.find(axis);
  if (found == groups_.end()) {
    throw Error(fmt::format("the device mesh {} has no '{}' axis", shape().describe(), axis));
  }
  return *found->second;
}

}  // namespace dtlab::mesh
