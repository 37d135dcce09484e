// Sub-groups of a process group, as torch.distributed.new_group: a pipeline of stage ranks that
// is also data parallel averages each stage's gradients over the ranks that hold that stage, and
// only over them. A sub-group is a Group like any other (the same timeout, backend, device and
// CommLog kinds of record); its rank() and size() count within it, and its errors name each
// rank by its world rank too: "rank 3 (rank 1 of stage 1's data-parallel group)".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dtlab/dist/group.h"

namespace dtlab::dist {

// The sub-group of `world` made of `ranks` (world ranks, distinct, ascending or not: the
// sub-group's rank i is ranks[i]). Called by every rank in `ranks`, and only by them, with the
// same list and the same name (c10d's ranks meet over the world's store under that name, so
// two sub-groups need two names); it waits at most the world's timeout for the others. Throws
// dtlab::Error for a list that does not contain the caller or names a rank twice or out of the
// world, and for a group made without a way to make sub-groups.
std::unique_ptr<Group> new_group(Group& world, const std::vector<int>& ranks, const std::string& name);

}  // namespace dtlab::dist
