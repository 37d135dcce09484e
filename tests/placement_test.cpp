// grader/placement.h: a rank's slice found in the whole tensor by value, its padding, and whether
// the ranks of a group hold every index once. The tp checks stand on it (Note [Answers found, not
// written] in grader/checks_tp.cpp), so a wrong placement would pay or dock a layout unfairly.
#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <string>
#include <vector>

#include "placement.h"

// Everything in a namespace named after the file (no anonymous namespace): the unit suites share
// one binary, compiled in groups of files (Note [Unity builds] in cmake/Dtlab.cmake), so helpers
// must not collide, and a TEST_F class must not derive from a type of an anonymous namespace.
namespace placement_test {

using dtlab::grader::Placement;
using dtlab::grader::place_by_value;

torch::Tensor columns(const torch::Tensor& t, std::vector<int64_t> which) {
  return t.index_select(1, torch::tensor(which, torch::kLong));
}

TEST(PlaceByValue, FindsEachColumnWhereverItLiesInTheWhole) {
  torch::manual_seed(1);
  const torch::Tensor whole = torch::randn({4, 6});
  std::string why;
  const auto p = place_by_value(columns(whole, {5, 0, 3}), whole, &why);
  ASSERT_TRUE(p) << why;
  EXPECT_EQ(p->dim, 1);
  EXPECT_EQ(p->index, (std::vector<int64_t>{5, 0, 3}));
  EXPECT_EQ(p->padding(), 0);
  EXPECT_TRUE(torch::equal(dtlab::grader::paired_part_of_whole(whole, *p), columns(whole, {5, 0, 3})));
}

TEST(PlaceByValue, ZeroRowsFoundNowhereArePaddingAndTheRestIsPaired) {
  torch::manual_seed(2);
  const torch::Tensor whole = torch::randn({5, 3});
  const torch::Tensor mine = torch::cat({whole.narrow(0, 3, 2), torch::zeros({1, 3})});  // rows 3, 4, padding
  std::string why;
  const auto p = place_by_value(mine, whole, &why);
  ASSERT_TRUE(p) << why;
  EXPECT_EQ(p->index, (std::vector<int64_t>{3, 4, -1}));
  EXPECT_EQ(p->padding(), 1);
  EXPECT_TRUE(torch::equal(dtlab::grader::real_part_of_mine(mine, *p), whole.narrow(0, 3, 2)));
  EXPECT_EQ(dtlab::grader::padding_part_of_mine(mine, *p).size(0), 1);
}

TEST(PlaceByValue, TheSameShapeIsTheWholeTensor) {
  const torch::Tensor whole = torch::ones({2, 2});
  std::string why;
  const auto p = place_by_value(whole, whole, &why);
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->whole());
}

TEST(PlaceByValue, RefusesASliceOfOtherValuesAnAmbiguousOneAndTwoSplitDimensions) {
  torch::manual_seed(3);
  const torch::Tensor whole = torch::randn({4, 6});
  std::string why;
  EXPECT_FALSE(place_by_value(columns(whole, {1, 2}) + 1e-3, whole, &why));
  EXPECT_NE(why.find("equals none of the whole's"), std::string::npos) << why;
  EXPECT_FALSE(place_by_value(torch::zeros({2}), torch::zeros({4}), &why));  // zeros: four candidates
  EXPECT_NE(why.find("equals several"), std::string::npos) << why;
  EXPECT_FALSE(place_by_value(whole.narrow(0, 0, 2).narrow(1, 0, 3), whole, &why));
  EXPECT_NE(why.find("dimensions 0 and 1"), std::string::npos) << why;
}

TEST(PartitionGap, NamesAnIndexHeldTwiceOrByNoRank) {
  Placement a, b;
  a.dim = b.dim = 0;
  a.index = {0, 1};
  b.index = {2, -1};
  EXPECT_EQ(dtlab::grader::partition_gap({&a, &b}, 3), "");
  EXPECT_EQ(dtlab::grader::partition_gap({&a, &b}, 4), "index 3 is on no rank");
  b.index = {1, 2};
  EXPECT_EQ(dtlab::grader::partition_gap({&a, &b}, 3), "index 1 is on ranks 0 and 1");
}

}  // namespace placement_test
