// A tensor × data grid of ranks, Megatron-LM's layout: world = TP × DP ranks, each rank in one
// tensor-parallel group (it holds a slice of every large weight and sees its group's minibatch)
// and one data-parallel group (the ranks that hold the SAME slices and see other minibatches,
// over which gradients are averaged). World rank r is TP rank r % TP of tensor group r / TP and
// DP rank r / TP of data group r % TP: the TP ranks are consecutive, so on a real cluster they
// share a host and its fast links (TP communicates in every layer, DP once a step). For world 4
// and TP 2:
//
//   tensor groups  {0, 1} {2, 3}        data groups  {0, 2} {1, 3}
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dtlab/dist/group.h"

namespace dtlab::tp {

// The world ranks of the tensor group and of the data group of world rank `rank`, in their
// groups' rank order. A dtlab::Error when TP is not positive or does not divide the world
// (naming both), or `rank` is not in the world.
std::vector<int> tensor_group_ranks(int world_size, int tp, int rank);
std::vector<int> data_group_ranks(int world_size, int tp, int rank);

class Grid {
 public:
  // Every rank of `world` makes the grid, with the same tp and name: its tensor group, then its
  // data group, each by dist::new_group (so `world` must be able to make sub-groups). `name`
  // prefixes the sub-groups' names: two grids over one world need two names. The grid keeps a
  // reference to `world`, which must outlive it. Size-1 groups are made too (TP 1 or DP 1), so
  // that a step never asks whether a group exists.
  Grid(dist::Group& world, int tp, const std::string& name = "grid");

  int tp() const { return tp_; }
  int dp() const { return dp_; }
  int tp_rank() const { return tensor_->rank(); }
  int dp_rank() const { return data_->rank(); }
  dist::Group& world() { return *world_; }
  dist::Group& tensor() { return *tensor_; }
  dist::Group& data() { return *data_; }

 private:
  dist::Group* world_;
  int tp_, dp_;
  std::unique_ptr<dist::Group> tensor_, data_;
};

}  // namespace dtlab::tp
