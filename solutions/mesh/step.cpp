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
  // BEGIN TODO(mesh): the ranks at this rank's place with its pipeline coordinate one less and one more: the same replica and the same tensor rank.
  const int stage = mesh.coordinate(kPipeline), stages = mesh.size(kPipeline);
  if (stage > 0) n.previous = rank_with(mesh, kPipeline, stage - 1);
  if (stage + 1 < stages) n.next = rank_with(mesh, kPipeline, stage + 1);
  // END TODO
  return n;
}

int tied_embedding_peer(DeviceMesh& mesh) {
  // BEGIN TODO(mesh): with more than one stage, the first stage's peer is the last stage's rank at its place and the last stage's the first's; none for one stage or a middle stage.
  const int stage = mesh.coordinate(kPipeline), stages = mesh.size(kPipeline);
  if (stages == 1 || (stage != 0 && stage != stages - 1)) return -1;
  return rank_with(mesh, kPipeline, stage == 0 ? stages - 1 : 0);
  // END TODO
}

void average_over_data(const std::vector<torch::Tensor>& grads, DeviceMesh& mesh) {
  // BEGIN TODO(mesh): over the data group only (its members hold the same slices): all of them in one collective (dist::all_reduce_tensors, SUM), then each divided by the data size.
  dist::Group& data = mesh.group(kData);
  if (data.size() == 1) return;
  dist::all_reduce_tensors(grads, data, dist::ReduceOp::SUM, "mesh data-parallel gradients");
  for (const torch::Tensor& g : grads) g.div_(data.size());
  // END TODO
}

double whole_model_gradient_norm(const std::vector<SliceGradient>& grads, DeviceMesh& mesh, bool sharded_over_data) {
  // BEGIN TODO(mesh): add each gradient's squares once for the whole mesh: a split slice on every tensor rank, a replicated copy on tensor rank 0 only, the last stage's copy of the tied embedding not at all (the first stage counts it); sum over the world; every replica added the same, so divide by the data size, unless sharded_over_data: the replicas' pieces then add up to one replica's slices.
  const bool first_tensor_rank = mesh.coordinate(kTensor) == 0;
  const bool second_copy_of_tied = mesh.size(kPipeline) > 1 && mesh.coordinate(kPipeline) == mesh.size(kPipeline) - 1;
  double squares = 0;
  for (const SliceGradient& g : grads) {
    if (!g.grad.defined() || (g.replicated && !first_tensor_rank)) continue;
    if (second_copy_of_tied && g.name == "transformer.wte.weight") continue;
    const double n = g.grad.norm(2).item<double>();
    squares += n * n;
  }
  torch::Tensor sum = torch::full({1}, squares, torch::kFloat64);
  mesh.world().all_reduce(sum, dist::ReduceOp::SUM, "gradient norm");
  return std::sqrt(sum.item<double>() / (sharded_over_data ? 1 : mesh.size(kData)));
  // END TODO
}

}  // namespace dtlab::mesh
