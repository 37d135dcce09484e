// A device mesh: the world's ranks laid out on named axes (mesh/layout.h) and, for this rank, the
// process group of each axis, made once at start. Every parallel axis takes its group here: the
// data-parallel average over group(kData), a tensor-parallel layer's all-reduce over
// group(kTensor), the stages' sends on the pipeline axis. As PyTorch's DeviceMesh, but its plan
// (the layout) is a value of its own that a test or a figure can probe without a process.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dtlab/dist/group.h"
#include "dtlab/mesh/layout.h"

namespace dtlab::mesh {

class DeviceMesh {
 public:
  // Every rank of `world`, at the same point, with the same shape and name: the shape's world must
  // be world's size (an Error naming both, on every rank, before any rank waits). It makes this
  // rank's group of every axis, slowest axis first (new_group waits for a group's members, and
  // with one order everywhere no rank waits on a group its partner makes later), size-1 groups
  // too, so that a step never asks whether a group exists; an axis whose group is the whole world,
  // in its order, is the world itself (dp's and zero's one data axis makes no group). `name`
  // prefixes the groups' names: two meshes over one world need two names. `world` must outlive the
  // mesh.
  DeviceMesh(dist::Group& world, MeshShape shape, const std::string& name = "mesh");
  // The same with the ranks placed by `layout` (the mesh exercise's: the student's coordinates).
  DeviceMesh(dist::Group& world, MeshLayout layout, const std::string& name = "mesh");

  const MeshLayout& layout() const { return layout_; }
  const MeshShape& shape() const { return layout_.shape(); }
  int rank() const { return world_->rank(); }
  // The axis's size and this rank's coordinate on it (1 and 0 for an axis the mesh lacks).
  int size(const std::string& axis) const { return shape().size(axis); }
  int coordinate(const std::string& axis) const { return layout_.coordinate(rank(), axis); }
  // This rank's group on `axis`: a dtlab::Error naming the axis and the mesh where the mesh lacks it.
  dist::Group& group(const std::string& axis);
  dist::Group& world() { return *world_; }

 private:
  dist::Group* world_;
  MeshLayout layout_;
  std::map<std::string, dist::Group*> groups_;
  std::vector<std::unique_ptr<dist::Group>> made_;
};

}  // namespace dtlab::mesh
