// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
// mesh, part 2: where the composed step's messages go (dtlab/tasks/mesh.h).
#include <cmath>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/dist/all_reduce_tensors.h"
#include "dtlab/dist/group.h"
#include "dtlab/tasks/mesh.h"

namespace dtlab::mesh {
namespace {

// The world rank at this rank's place with its coordinate on `axis` replaced by `value`.
[[maybe_unused]] int rank_with(DeviceMesh& mesh, const std::string& axis, int value) {
  std::vector<int> coordinates = mesh.layout().coordinates(mesh.rank());
  coordinates[static_cast<size_t>(mesh.shape().index_of(axis))] = value;
  return mesh.layout().rank_of(coordinates);
}

}  // namespace

StageNeighbours stage_neighbours(DeviceMesh& mesh) {
  StageNeighbours n;
  // TODO(mesh): the ranks at this rank's place with its pipeline coordinate one less and one more: the same replica and the same tensor rank.
  throw dtlab::NotImplemented("TODO(mesh): the ranks at this rank's place with its pipeline coordinate one less and one more: the same replica and the same tensor rank.");
  return n;
}

int tied_embedding_peer(DeviceMesh& mesh) {
  // TODO(mesh): with more than one stage, the first stage's peer is the last stage's rank at its place and the last stage's the first's; none for one stage or a middle stage.
  throw dtlab::NotImplemented("TODO(mesh): with more than one stage, the first stage's peer is the last stage's rank at its place and the last stage's the first's; none for one stage or a middle stage.");
}

void average_over_data(const std::vector<torch::Tensor>& grads, DeviceMesh& mesh) {
  // TODO(mesh): over the data group only (its members hold the same slices): all of them in one collective (dist::all_reduce_tensors, SUM), then each divided by the data size.
  throw dtlab::NotImplemented("TODO(mesh): over the data group only (its members hold the same slices): all of them in one collective (dist::all_reduce_tensors, SUM), then each divided by the data size.");
}

double whole_model_gradient_norm(const std::vector<SliceGradient>& grads, DeviceMesh& mesh, bool sharded_over_data) {
  // TODO(mesh): add each gradient's squares once for the whole mesh: a split slice on every tensor rank, a replicated copy on tensor rank 0 only, the last stage's copy of the tied embedding not at all (the first stage counts it); sum over the world; every replica added the same, so divide by the data size, unless sharded_over_data: the replicas' pieces then add up to one replica's slices.
  throw dtlab::NotImplemented("TODO(mesh): add each gradient's squares once for the whole mesh: a split slice on every tensor rank, a replicated copy on tensor rank 0 only, the last stage's copy of the tied embedding not at all (the first stage counts it); sum over the world; every replica added the same, so divide by the data size, unless sharded_over_data: the replicas' pieces then add up to one replica's slices.");
}

}  // namespace dtlab::mesh
