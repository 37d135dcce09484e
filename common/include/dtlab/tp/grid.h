// The tensor x data view of a device mesh (mesh/device_mesh.h), Megatron-LM's layout: world = DP x
// TP ranks in the mesh's order (Note [The mesh's order]), each rank in one tensor-parallel group
// (it holds a slice of every large weight and sees its group's minibatch) and one data-parallel
// group (the ranks that hold the SAME slices and see other minibatches, over which gradients are
// averaged). Tensor is the fastest axis: world rank r is TP rank r % TP of tensor group r / TP and
// DP rank r / TP of data group r % TP, so the TP ranks are consecutive and on a real cluster share
// a host and its fast links (TP communicates in every layer, DP once a step). For world 4, TP 2:
//
//   tensor groups  {0, 1} {2, 3}        data groups  {0, 2} {1, 3}
#pragma once

#include <string>
#include <vector>

#include "dtlab/dist/group.h"
#include "dtlab/mesh/device_mesh.h"

namespace dtlab::tp {

// The world ranks of the tensor group and of the data group of world rank `rank`, in their
// groups' rank order (the mesh's layout). A dtlab::Error when TP is not positive or does not
// divide the world (naming both), or `rank` is not in the world.
std::vector<int> tensor_group_ranks(int world_size, int tp, int rank);
std::vector<int> data_group_ranks(int world_size, int tp, int rank);

class Grid {
 public:
  // Every rank of `world` makes the grid, with the same tp and name: the mesh data (world / TP) x
  // tensor (TP) and its groups (so `world` must be able to make sub-groups), size-1 groups too.
  // `name` prefixes the groups' names: two grids over one world need two names. The grid keeps a
  // reference to `world`, which must outlive it.
  Grid(dist::Group& world, int tp, const std::string& name = "grid");

  int tp() const { return mesh_.size(mesh::kTensor); }
  int dp() const { return mesh_.size(mesh::kData); }
  int tp_rank() const { return mesh_.coordinate(mesh::kTensor); }
  int dp_rank() const { return mesh_.coordinate(mesh::kData); }
  dist::Group& world() { return mesh_.world(); }
  dist::Group& tensor() { return mesh_.group(mesh::kTensor); }
  dist::Group& data() { return mesh_.group(mesh::kData); }
  const mesh::DeviceMesh& mesh() const { return mesh_; }

 private:
  mesh::DeviceMesh mesh_;
};

}  // namespace dtlab::tp
