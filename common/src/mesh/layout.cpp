// The device mesh's plan, see mesh/layout.h.
#include "dtlab/mesh/layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "dtlab/core/error.h"

namespace dtlab::mesh {

const std::vector<std::string> kMegatronOrder = {kPipeline, kData, kExpert, kContext, kTensor};

MeshShape::MeshShape(std::vector<Axis> axes) : axes_(std::move(axes)) {
  if (axes_.empty()) throw Error("a device mesh needs at least one axis");
  std::set<std::string> seen;
  for (const Axis& a : axes_) {
    if (a.name.empty()) throw Error("a device mesh's axis needs a name");
    if (!seen.insert(a.name).second) throw Error(fmt::format("the device mesh names the axis '{}' twice", a.name));
    if (a.size < 1) throw Error(fmt::format("the device mesh's axis '{}' has size {}: it must be at least 1", a.name, a.size));
  }
}

MeshShape MeshShape::ordered(const std::vector<Axis>& sizes, const std::vector<std::string>& order) {
  for (const Axis& a : sizes) {
    if (std::find(order.begin(), order.end(), a.name) == order.end()) {
      throw Error(fmt::format("the device mesh's axis '{}' is not in its order ({})", a.name, fmt::join(order, ", ")));
    }
  }
  std::vector<Axis> axes;
  for (const std::string& name : order) {
    for (const Axis& a : sizes) {
      if (a.name == name) axes.push_back(a);
    }
  }
  return MeshShape(std::move(axes));
}

int MeshShape::world() const {
  int world = 1;
  for (const Axis& a : axes_) world *= a.size;
  return world;
}

int MeshShape::index_of(const std::string& axis) const {
  for (size_t i = 0; i < axes_.size(); ++i) {
    if (axes_[i].name == axis) return static_cast<int>(i);
  }
  return -1;
}

int MeshShape::size(const std::string& axis) const {
  const int i = index_of(axis);
  return i < 0 ? 1 : axes_[static_cast<size_t>(i)].size;
}

std::string MeshShape::describe() const {
  std::vector<std::string> parts;
  for (const Axis& a : axes_) parts.push_back(fmt::format("{} {}", a.name, a.size));
  return fmt::format("{}", fmt::join(parts, " x "));
}

// The table is counted out as an odometer counts, rank after rank: the last axis's wheel turns at
// every rank, and a wheel that passes its size turns the one before it.
MeshLayout::MeshLayout(MeshShape shape) : shape_(std::move(shape)) {
  const std::vector<Axis>& axes = shape_.axes();
  std::vector<int> wheels(axes.size(), 0);
  for (int rank = 0; rank < shape_.world(); ++rank) {
    coordinates_.push_back(wheels);
    for (size_t i = axes.size(); i-- > 0;) {
      if (++wheels[i] < axes[i].size) break;
      wheels[i] = 0;
    }
  }
}

MeshLayout::MeshLayout(MeshShape shape, std::vector<std::vector<int>> coordinates)
    : shape_(std::move(shape)), coordinates_(std::move(coordinates)) {
  const std::vector<Axis>& axes = shape_.axes();
  if (static_cast<int>(coordinates_.size()) != shape_.world()) {
    throw Error(fmt::format("the layout of the device mesh {} lists {} ranks, not its {}", shape_.describe(),
                            coordinates_.size(), shape_.world()));
  }
  std::set<std::vector<int>> places;
  for (size_t rank = 0; rank < coordinates_.size(); ++rank) {
    const std::vector<int>& c = coordinates_[rank];
    if (c.size() != axes.size()) {
      throw Error(fmt::format("rank {}'s coordinates ({}) in the device mesh {}: one for each of its {} axes", rank,
                              fmt::join(c, ", "), shape_.describe(), axes.size()));
    }
    for (size_t i = 0; i < axes.size(); ++i) {
      if (c[i] < 0 || c[i] >= axes[i].size) {
        throw Error(fmt::format("rank {}'s coordinates ({}) in the device mesh {}: its {} coordinate {} is outside "
                                "0 to {}", rank, fmt::join(c, ", "), shape_.describe(), axes[i].name, c[i],
                                axes[i].size - 1));
      }
    }
    if (!places.insert(c).second) {
      const auto first = std::find(coordinates_.begin(), coordinates_.end(), c) - coordinates_.begin();
      throw Error(fmt::format("ranks {} and {} both sit at ({}) in the device mesh {}: each place holds one rank",
                              first, rank, fmt::join(c, ", "), shape_.describe()));
    }
  }
}

void MeshLayout::check_rank(int rank) const {
  if (rank < 0 || rank >= world()) {
    throw Error(fmt::format("rank {} is not in the device mesh {} of {} ranks", rank, shape_.describe(), world()));
  }
}

const std::vector<int>& MeshLayout::coordinates(int rank) const {
  check_rank(rank);
  return coordinates_[static_cast<size_t>(rank)];
}

int MeshLayout::coordinate(int rank, const std::string& axis) const {
  const int i = shape_.index_of(axis);
  return i < 0 ? (check_rank(rank), 0) : coordinates(rank)[static_cast<size_t>(i)];
}

int MeshLayout::rank_of(const std::vector<int>& coordinates) const {
  const auto found = std::find(coordinates_.begin(), coordinates_.end(), coordinates);
  if (found == coordinates_.end()) {
    throw Error(fmt::format("coordinates ({}) are not in the device mesh {}", fmt::join(coordinates, ", "),
                            shape_.describe()));
  }
  return static_cast<int>(found - coordinates_.begin());
}

std::vector<int> MeshLayout::group(int rank, const std::string& axis) const {
  const int a = shape_.index_of(axis);
  const std::vector<int>& mine = coordinates(rank);
  if (a < 0) return {rank};
  std::vector<int> members(static_cast<size_t>(shape_.axes()[static_cast<size_t>(a)].size), -1);
  for (int r = 0; r < world(); ++r) {
    std::vector<int> theirs = coordinates_[static_cast<size_t>(r)];
    const int along = theirs[static_cast<size_t>(a)];
    theirs[static_cast<size_t>(a)] = mine[static_cast<size_t>(a)];
    if (theirs == mine) members[static_cast<size_t>(along)] = r;
  }
  return members;
}

std::vector<std::vector<int>> MeshLayout::groups(const std::string& axis) const {
  std::vector<std::vector<int>> all;
  std::vector<bool> placed(static_cast<size_t>(world()), false);
  for (int r = 0; r < world(); ++r) {
    if (placed[static_cast<size_t>(r)]) continue;
    all.push_back(group(r, axis));
    for (int member : all.back()) placed[static_cast<size_t>(member)] = true;
  }
  return all;
}

std::string MeshLayout::describe() const {
  std::vector<std::string> parts;
  for (const Axis& a : shape_.axes()) {
    if (a.size == 1) continue;
    std::vector<std::string> each;
    for (const std::vector<int>& g : groups(a.name)) each.push_back(fmt::format("{{{}}}", fmt::join(g, ", ")));
    parts.push_back(fmt::format("{} {}", a.name, fmt::join(each, " ")));
  }
  return fmt::format("{}: {}", shape_.describe(), parts.empty() ? "one rank" : fmt::format("{}", fmt::join(parts, "; ")));
}

}  // namespace dtlab::mesh
