// Where a rank's slice of a split tensor lies in one process's whole tensor, found by value.
//
// A tensor-parallel rank holds part of a tensor: some columns of c_attn, some rows of wte. The
// grader does not say which (that would be the answer to the exercise, shipped with the student
// release); it finds them. At step 1, before any update, each slice of the rank's parameter along
// the split dimension is bit for bit one of the whole's, and GPT-2's weights are random, so no two
// of the whole's slices are equal. A slice of zeros found nowhere is padding (wte's rows past the
// vocabulary). The checks then state properties of what was found (the ranks together hold every
// slice once; the same heads in q, k and v) and compare the gradients at the places found.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>

namespace dtlab::grader {

struct Placement {
  int64_t dim = -1;            // the dimension split; -1: the rank holds the whole tensor
  std::vector<int64_t> index;  // per position of the slice along dim: the whole's index there, or -1 (padding)

  bool whole() const { return dim < 0; }
  int64_t padding() const;
};

// The placement of `mine` in `whole`: they must have the same shape but along one dimension, and
// every slice of mine along it must equal exactly one of whole's (one of several equal ones cannot
// be placed), or be all zeros found nowhere (padding).
// nullopt, with the reason in *why, otherwise. The same shape is the whole tensor (dim -1).
std::optional<Placement> place_by_value(const torch::Tensor& mine, const torch::Tensor& whole, std::string* why);

// The placement of a rank's parameter `name` of GPT-2: by value, except a split bias (zeros at step
// 1, so found by no value), which lies where its weight's columns do (a Conv1D's bias is [out]:
// its weight's dimension 1), read from `placed` (the weights placed first). nullopt with the
// reason in *why otherwise. tp's and the mesh's gradient checks place every slice with it.
std::optional<Placement> place_parameter(const std::string& name, const torch::Tensor& mine, const torch::Tensor& whole,
                                         const std::map<std::string, Placement>& placed, std::string* why);

// The positions of mine (real = true) or of whole that a placement pairs, along its dimension;
// the padding's positions in mine. Whole placements give the tensors unchanged (and no padding).
torch::Tensor real_part_of_mine(const torch::Tensor& mine, const Placement& p);
torch::Tensor paired_part_of_whole(const torch::Tensor& whole, const Placement& p);
torch::Tensor padding_part_of_mine(const torch::Tensor& mine, const Placement& p);

// The placements of one tensor on the ranks of a tensor group hold each of the whole's `size`
// indices exactly once: "" if so, else what goes wrong ("index 17 is on no rank", "index 3 is on
// ranks 0 and 1"); ranks are named by their position in `ranks`.
std::string partition_gap(const std::vector<const Placement*>& ranks, int64_t size);

}  // namespace dtlab::grader
