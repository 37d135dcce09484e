// Deliberately broken mesh solutions, one per mistake of the lesson, chosen at run time by
// DTLAB_MUTANT (unset: correct, solutions/mesh's code). grader_mutants_test grades each and expects
// the check that should catch it to fail with the right words. Four are right in every number
// (Note [What the mesh's numbers cannot show] in grader/checks_mesh.cpp): tensor_axis_slowest,
// other_tensor_rank, all_reduce_per_gradient and norm_per_gradient. The binary links pp's mutants
// (tests/mutants/pp_mutants.cpp) in place of pp's reference, as the mesh compiles a student's own
// tasks/pp: pp's mistakes chosen by the same DTLAB_MUTANT reach the mesh's checks too (a warm-up
// one forward too long: the memory check). Test code: never part of a student release.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/dist/all_reduce_tensors.h"
#include "dtlab/dist/group.h"
#include "dtlab/tasks/mesh.h"

namespace dtlab::mesh {
namespace {

bool mutant(const char* name) {
  const char* m = std::getenv("DTLAB_MUTANT");
  return m && std::string(m) == name;
}

int world_of(const std::vector<int>& sizes) {
  int world = 1;
  for (const int s : sizes) world *= s;
  return world;
}

// The world rank at this rank's place with the coordinates on `axes` replaced by `values`.
int rank_with(DeviceMesh& mesh, const std::vector<std::pair<std::string, int>>& changes) {
  std::vector<int> coordinates = mesh.layout().coordinates(mesh.rank());
  for (const auto& [axis, value] : changes) coordinates[static_cast<size_t>(mesh.shape().index_of(axis))] = value;
  return mesh.layout().rank_of(coordinates);
}

}  // namespace

std::vector<int> coordinates_of(int rank, const std::vector<int>& sizes) {
  const int world = world_of(sizes);
  if (rank < 0 || rank >= world) {
    throw Error(fmt::format("rank {} is not in a mesh of {} ranks ({})", rank, world, fmt::join(sizes, " x ")));
  }
  std::vector<int> coordinates(sizes.size(), 0);
  int rest = rank;
  if (mutant("tensor_axis_slowest")) {  // the first axis turns fastest: a valid layout, the wrong one
    for (size_t i = 0; i < sizes.size(); ++i) {
      coordinates[i] = rest % sizes[i];
      rest /= sizes[i];
    }
    return coordinates;
  }
  for (size_t i = sizes.size(); i-- > 0;) {
    coordinates[i] = rest % sizes[i];
    rest /= sizes[i];
  }
  return coordinates;
}

std::vector<int> group_of(int rank, int axis, const std::vector<int>& sizes) {
  if (axis < 0 || axis >= static_cast<int>(sizes.size())) {
    throw Error(fmt::format("axis {} is not one of the mesh's {} axes", axis, sizes.size()));
  }
  const std::vector<int> mine = coordinates_of(rank, sizes);
  int stride = 1;
  if (mutant("tensor_axis_slowest")) {  // consistent with its coordinates: the axes before are faster
    for (int i = 0; i < axis; ++i) stride *= sizes[static_cast<size_t>(i)];
  } else {
    for (size_t i = static_cast<size_t>(axis) + 1; i < sizes.size(); ++i) stride *= sizes[i];
  }
  const int first = rank - mine[static_cast<size_t>(axis)] * stride;
  std::vector<int> members;
  for (int c = 0; c < sizes[static_cast<size_t>(axis)]; ++c) members.push_back(first + c * stride);
  return members;
}

StageNeighbours stage_neighbours(DeviceMesh& mesh) {
  StageNeighbours n;
  const int stage = mesh.coordinate(kPipeline), stages = mesh.size(kPipeline);
  const int t = mesh.coordinate(kTensor), tensors = mesh.size(kTensor);
  // other_tensor_rank: each stage sends to the next tensor rank of the next stage (and receives
  // from the previous one's): paired on both sides, the same numbers, the wrong links.
  const bool other = mutant("other_tensor_rank");
  if (stage > 0) {
    n.previous = rank_with(mesh, {{kPipeline, stage - 1}, {kTensor, other ? (t + tensors - 1) % tensors : t}});
  }
  if (stage + 1 < stages) n.next = rank_with(mesh, {{kPipeline, stage + 1}, {kTensor, other ? (t + 1) % tensors : t}});
  return n;
}

int tied_embedding_peer(DeviceMesh& mesh) {
  const int stage = mesh.coordinate(kPipeline), stages = mesh.size(kPipeline);
  if (stages == 1 || (stage != 0 && stage != stages - 1)) return -1;
  const int t = mesh.coordinate(kTensor), tensors = mesh.size(kTensor);
  // tied_across_tensor_ranks: the other end's next tensor rank, which holds other rows of wte
  // (paired on both sides at TP 2).
  const int peer_t = mutant("tied_across_tensor_ranks") ? (t + 1) % tensors : t;
  return rank_with(mesh, {{kPipeline, stage == 0 ? stages - 1 : 0}, {kTensor, peer_t}});
}

void average_over_data(const std::vector<torch::Tensor>& grads, DeviceMesh& mesh) {
  // average_over_tensor_group: the mean over the ranks that hold the other slices of the stage.
  dist::Group& group = mesh.group(mutant("average_over_tensor_group") ? kTensor : kData);
  if (group.size() == 1) return;
  if (mutant("all_reduce_per_gradient")) {  // the same bytes and numbers, one operation per tensor
    for (const torch::Tensor& g : grads) {
      torch::Tensor t = g;
      group.all_reduce(t, dist::ReduceOp::SUM, "mesh gradient");
    }
    for (const torch::Tensor& g : grads) g.div_(group.size());
    return;
  }
  dist::all_reduce_tensors(grads, group, dist::ReduceOp::SUM, "mesh data-parallel gradients");
  for (const torch::Tensor& g : grads) g.div_(group.size());
}

double whole_model_gradient_norm(const std::vector<SliceGradient>& grads, DeviceMesh& mesh, bool sharded_over_data) {
  const bool first_tensor_rank = mesh.coordinate(kTensor) == 0;
  const bool second_copy_of_tied = mesh.size(kPipeline) > 1 && mesh.coordinate(kPipeline) == mesh.size(kPipeline) - 1;
  // replicated_counted_tp_times: every tensor rank adds its copy of a replicated parameter.
  const bool every_copy = mutant("replicated_counted_tp_times");
  if (mutant("norm_per_gradient")) {  // each parameter's squares summed over its tensor group, one by one
    double squares = 0;
    for (const SliceGradient& g : grads) {
      const bool counted = g.grad.defined() && (!g.replicated || first_tensor_rank) &&
                           !(second_copy_of_tied && g.name == "transformer.wte.weight");
      const double n = counted ? g.grad.norm(2).item<double>() : 0.0;
      torch::Tensor whole = torch::full({1}, n * n, torch::kFloat64);
      mesh.group(kTensor).all_reduce(whole, dist::ReduceOp::SUM, "gradient norm " + g.name);
      squares += whole.item<double>();
    }
    torch::Tensor sum = torch::full({1}, squares, torch::kFloat64);
    mesh.group(kPipeline).all_reduce(sum, dist::ReduceOp::SUM, "gradient norm");
    if (sharded_over_data) mesh.group(kData).all_reduce(sum, dist::ReduceOp::SUM, "gradient norm");
    return std::sqrt(sum.item<double>());
  }
  double squares = 0;
  for (const SliceGradient& g : grads) {
    if (!g.grad.defined() || (g.replicated && !first_tensor_rank && !every_copy)) continue;
    if (second_copy_of_tied && g.name == "transformer.wte.weight") continue;
    const double n = g.grad.norm(2).item<double>();
    squares += n * n;
  }
  torch::Tensor sum = torch::full({1}, squares, torch::kFloat64);
  mesh.world().all_reduce(sum, dist::ReduceOp::SUM, "gradient norm");
  // pieces_as_copies: ZeRO-1's pieces divided by the data size as if each replica held them all.
  const bool pieces = sharded_over_data && !mutant("pieces_as_copies");
  return std::sqrt(sum.item<double>() / (pieces ? 1 : mesh.size(kData)));
}

}  // namespace dtlab::mesh
