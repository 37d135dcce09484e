// The device mesh's plan: which world rank sits at which coordinates on named axes, and the ranks
// of each axis's groups, computed apart from any process group (plan apart from execution, as
// c10d's DeviceMesh and Megatron-LM's RankGenerator do). A rank's group on an axis is the ranks
// that share all its other coordinates, in the order of that axis's coordinate: a tensor group
// holds the slices of one layer, a data group the replicas that average a gradient, a pipeline
// group the stages of one pipeline. No LibTorch: the foundation's (Note [The foundation]).
//
// Note [The mesh's order]: axes are listed slowest first, so the last axis's neighbours are
// neighbouring world ranks. Launchers place consecutive ranks on one host, so the fastest axis
// stays inside a host: Megatron-LM's order (kMegatronOrder) puts tensor fastest, since a tensor
// group talks in every layer, then context, data, and pipeline slowest, whose only traffic is one
// activation per micro-batch. 8 ranks as pipeline 2 x data 2 x tensor 2, in that order:
//
//   tensor groups {0,1} {2,3} {4,5} {6,7}   data groups {0,2} {1,3} {4,6} {5,7}
//   pipeline groups {0,4} {1,5} {2,6} {3,7}
//
// The order is a parameter: pp keeps a pipeline's stages neighbouring (data slowest), and the mesh
// exercise's figure shows what the tensor axis costs when it is not the fastest.
#pragma once

#include <string>
#include <vector>

namespace dtlab::mesh {

// The axes the kit knows, by name.
inline constexpr const char* kData = "data";
inline constexpr const char* kPipeline = "pipeline";
inline constexpr const char* kTensor = "tensor";
inline constexpr const char* kContext = "context";
inline constexpr const char* kExpert = "expert";

struct Axis {
  std::string name;
  int size = 1;
};

// The axes slowest first, as Megatron-LM orders them (Note [The mesh's order]).
extern const std::vector<std::string> kMegatronOrder;

class MeshShape {
 public:
  // A dtlab::Error naming the axis for an empty or repeated name or a size below 1, and for a
  // mesh without an axis.
  explicit MeshShape(std::vector<Axis> axes);
  // `sizes` by name, ordered by `order` (slowest first); an axis of `order` not in `sizes` is
  // left out, and a name of `sizes` that `order` lacks is an Error naming it.
  static MeshShape ordered(const std::vector<Axis>& sizes, const std::vector<std::string>& order = kMegatronOrder);

  const std::vector<Axis>& axes() const { return axes_; }
  int world() const;
  // The axis's position among axes() (-1: not in the mesh), and its size (1: not in the mesh, as
  // an absent axis is one of size 1).
  int index_of(const std::string& axis) const;
  int size(const std::string& axis) const;
  // "pipeline 2 x data 2 x tensor 2"
  std::string describe() const;

 private:
  std::vector<Axis> axes_;
};

class MeshLayout {
 public:
  // The shape's ranks counted out in its order (Note [The mesh's order]).
  explicit MeshLayout(MeshShape shape);
  // A layout given rank by rank (the mesh exercise's, from the student's coordinates_of):
  // coordinates[r] is rank r's coordinate on every axis, in the shape's order. A dtlab::Error
  // naming the rank for a table that is not one row per rank of the shape's world, a row whose
  // length is not the axes' count or whose coordinate is outside its axis, or two ranks at one
  // place.
  MeshLayout(MeshShape shape, std::vector<std::vector<int>> coordinates);

  const MeshShape& shape() const { return shape_; }
  int world() const { return static_cast<int>(coordinates_.size()); }
  // Rank `rank`'s coordinate on every axis, in the shape's order; and on one axis (0 for an axis
  // the mesh does not have). A dtlab::Error for a rank outside the world or an unknown coordinate.
  const std::vector<int>& coordinates(int rank) const;
  int coordinate(int rank, const std::string& axis) const;
  int rank_of(const std::vector<int>& coordinates) const;
  // The world ranks of `rank`'s group on `axis`, in the order of that axis's coordinate (for an
  // axis the mesh does not have: {rank}); and every group of the axis, in the order of their
  // first rank.
  std::vector<int> group(int rank, const std::string& axis) const;
  std::vector<std::vector<int>> groups(const std::string& axis) const;
  // The shape and every axis's groups, which say every rank's place (a run's `mesh` line):
  // "pipeline 2 x data 2 x tensor 2: pipeline {0, 4} {1, 5} {2, 6} {3, 7}; data {0, 2} {1, 3}
  // {4, 6} {5, 7}; tensor {0, 1} {2, 3} {4, 5} {6, 7}" (an axis of size 1 has no groups to list).
  std::string describe() const;

 private:
  void check_rank(int rank) const;
  MeshShape shape_;
  std::vector<std::vector<int>> coordinates_;  // [rank][axis]
};

}  // namespace dtlab::mesh
