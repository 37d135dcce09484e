// The tensor x data grid of ranks (tp/grid.h): which world ranks form each tensor and data group,
// a TP that does not divide the world refused on every rank before it waits, and each group's
// all_reduce over its own ranks only. Kit code alone: no solution is compiled in, so a student kit
// runs it too (make test-tp).
#include <gtest/gtest.h>

#include <torch/types.h>

#include <vector>

#include "dist_test_util.h"
#include "dtlab/core/error.h"
#include "dtlab/tp/grid.h"
#include "test_util.h"

namespace tp_grid_test {

using dtlab::dist::Group;
using dtlab::test::run_ranks;

TEST(Grid, TensorRanksAreConsecutiveAndDataRanksStrided) {
  using dtlab::tp::data_group_ranks;
  using dtlab::tp::tensor_group_ranks;
  EXPECT_EQ(tensor_group_ranks(4, 2, 3), (std::vector<int>{2, 3}));
  EXPECT_EQ(data_group_ranks(4, 2, 3), (std::vector<int>{1, 3}));
  EXPECT_EQ(tensor_group_ranks(6, 3, 1), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(data_group_ranks(6, 3, 1), (std::vector<int>{1, 4}));
  EXPECT_EQ(tensor_group_ranks(3, 3, 2), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(data_group_ranks(3, 3, 2), (std::vector<int>{2}));
  EXPECT_EQ(tensor_group_ranks(2, 1, 1), (std::vector<int>{1}));
  EXPECT_EQ(data_group_ranks(2, 1, 1), (std::vector<int>{0, 1}));
}

TEST(Grid, ATPThatDoesNotDivideTheWorldIsNamed) {
  EXPECT_THROW_WITH(dtlab::tp::tensor_group_ranks(4, 3, 0), dtlab::Error,
                    "tensor parallelism of 3 does not divide the world of 4 ranks");
  EXPECT_THROW_WITH(dtlab::tp::data_group_ranks(4, 0, 0), dtlab::Error, "at least 1");
  // Every rank refuses before it waits for a sub-group.
  run_ranks(4, [](Group& world) {
    EXPECT_THROW_WITH(dtlab::tp::Grid grid(world, 3), dtlab::Error, "of 3 does not divide the world of 4 ranks");
  });
}

TEST(Grid, EachGroupReducesOverItsRanks) {
  run_ranks(4, [](Group& world) {
    dtlab::tp::Grid grid(world, 2);
    const int r = world.rank();
    EXPECT_EQ(grid.tp(), 2);
    EXPECT_EQ(grid.dp(), 2);
    EXPECT_EQ(grid.tp_rank(), r % 2);
    EXPECT_EQ(grid.dp_rank(), r / 2);
    torch::Tensor t = torch::full({1}, double(r));
    grid.tensor().all_reduce(t, dtlab::dist::ReduceOp::SUM, "tensor");
    EXPECT_EQ(t.item<double>(), r / 2 * 4 + 1) << "ranks 2(r/2) and 2(r/2)+1";
    torch::Tensor d = torch::full({1}, double(r));
    grid.data().all_reduce(d, dtlab::dist::ReduceOp::SUM, "data");
    EXPECT_EQ(d.item<double>(), r % 2 * 2 + 2) << "ranks r%2 and r%2+2";
  });
}

}  // namespace tp_grid_test
