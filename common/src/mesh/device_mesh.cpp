// A device mesh's groups, see mesh/device_mesh.h.
#include "dtlab/mesh/device_mesh.h"

#include <fmt/format.h>

#include "dtlab/core/error.h"
#include "dtlab/dist/subgroup.h"

namespace dtlab::mesh {
namespace {

MeshLayout checked_layout(const dist::Group& world, MeshLayout layout) {
  const MeshShape& shape = layout.shape();
  if (shape.world() != world.size()) {
    throw Error(fmt::format("the device mesh {} holds {} ranks, the world {}: the axes' sizes must multiply to the "
                            "world size",
                            shape.describe(), shape.world(), world.size()));
  }
  return layout;
}

}  // namespace

DeviceMesh::DeviceMesh(dist::Group& world, MeshShape shape, const std::string& name)
    : DeviceMesh(world, MeshLayout(std::move(shape)), name) {}

DeviceMesh::DeviceMesh(dist::Group& world, MeshLayout layout, const std::string& name)
    : world_(&world), layout_(checked_layout(world, std::move(layout))) {
  for (const Axis& axis : layout_.shape().axes()) {
    const std::vector<int> members = layout_.group(rank(), axis.name);
    bool in_order = axis.size == world.size();
    for (size_t i = 0; in_order && i < members.size(); ++i) in_order = members[i] == static_cast<int>(i);
    if (in_order) {  // the world's ranks in the world's order (the one axis of size N)
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
