// The device mesh (mesh/layout.h, mesh/device_mesh.h): which world ranks sit where on the named
// axes in Megatron-LM's order and in another, the groups of every axis at meshes too large to
// run here, shapes refused with their axis named, and each axis's group reducing over its own
// ranks only. Kit code alone: a student kit runs it too.
#include <gtest/gtest.h>

#include <torch/types.h>

#include <set>
#include <vector>

#include "dist_test_util.h"
#include "dtlab/core/error.h"
#include "dtlab/dist/ring_step.h"
#include "dtlab/mesh/device_mesh.h"
#include "dtlab/mesh/layout.h"
#include "test_util.h"

namespace mesh_test {

using dtlab::mesh::Axis;
using dtlab::mesh::kData;
using dtlab::mesh::kPipeline;
using dtlab::mesh::kTensor;
using dtlab::mesh::MeshLayout;
using dtlab::mesh::MeshShape;
using Groups = std::vector<std::vector<int>>;

MeshLayout megatron(int data, int pipeline, int tensor) {
  return MeshLayout(MeshShape::ordered({{kData, data}, {kPipeline, pipeline}, {kTensor, tensor}}));
}

TEST(MeshLayout, MegatronOrderKeepsTensorGroupsNeighbouring) {
  const MeshLayout m = megatron(2, 2, 2);
  EXPECT_EQ(m.shape().describe(), "pipeline 2 x data 2 x tensor 2");
  EXPECT_EQ(m.groups(kTensor), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(m.groups(kData), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(m.groups(kPipeline), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(m.coordinates(5), (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(m.rank_of({1, 1, 0}), 6);
  EXPECT_EQ(m.describe(), "pipeline 2 x data 2 x tensor 2: pipeline {0, 4} {1, 5} {2, 6} {3, 7}; data {0, 2} {1, 3} "
                          "{4, 6} {5, 7}; tensor {0, 1} {2, 3} {4, 5} {6, 7}");
  EXPECT_EQ(megatron(1, 1, 2).describe(), "pipeline 1 x data 1 x tensor 2: tensor {0, 1}");
  EXPECT_EQ(MeshLayout(MeshShape({{kData, 1}})).describe(), "data 1: one rank");
}

// A mesh too large to train here, probed as a function: every group of an axis has the axis's
// size, the groups of an axis cover the world once, a rank's group holds exactly the ranks that
// share its other coordinates, in the order of the axis's coordinate, and the coordinates and
// rank_of are inverse.
TEST(MeshLayout, EveryAxisPartitionsTheWorldAtThreeByTwoByFour) {
  const MeshLayout m = megatron(3, 2, 4);
  ASSERT_EQ(m.world(), 24);
  for (const std::string axis : {kData, kPipeline, kTensor}) {
    std::set<int> seen;
    for (const std::vector<int>& g : m.groups(axis)) {
      EXPECT_EQ(static_cast<int>(g.size()), m.shape().size(axis)) << axis;
      for (size_t i = 0; i < g.size(); ++i) {
        EXPECT_TRUE(seen.insert(g[i]).second) << axis << " names rank " << g[i] << " twice";
        EXPECT_EQ(m.coordinate(g[i], axis), static_cast<int>(i)) << axis;
        EXPECT_EQ(m.group(g[i], axis), g) << axis;
        for (const std::string other : {kData, kPipeline, kTensor}) {
          if (other != axis) {
            EXPECT_EQ(m.coordinate(g[i], other), m.coordinate(g[0], other)) << axis << " " << other;
          }
        }
      }
    }
    EXPECT_EQ(seen.size(), 24u) << axis;
  }
  for (int r = 0; r < 24; ++r) EXPECT_EQ(m.rank_of(m.coordinates(r)), r);
  EXPECT_EQ(m.group(13, kTensor), (std::vector<int>{12, 13, 14, 15}));
  EXPECT_EQ(m.group(13, kData), (std::vector<int>{13, 17, 21}));
  EXPECT_EQ(m.group(13, kPipeline), (std::vector<int>{1, 13}));
}

TEST(MeshLayout, TheOrderIsAParameter) {
  // pp's order: a pipeline's stages neighbouring, the replicas strided (data slowest).
  const MeshLayout m(MeshShape::ordered({{kData, 2}, {kPipeline, 3}}, {kData, kPipeline}));
  EXPECT_EQ(m.groups(kPipeline), (Groups{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(m.groups(kData), (Groups{{0, 3}, {1, 4}, {2, 5}}));
  // The tensor axis slowest: groups of the same size, other members.
  const MeshLayout slow(MeshShape({{kTensor, 2}, {kData, 2}}));
  EXPECT_EQ(slow.groups(kTensor), (Groups{{0, 2}, {1, 3}}));
  // An axis the mesh lacks is one of size 1.
  EXPECT_EQ(slow.group(3, kPipeline), (std::vector<int>{3}));
  EXPECT_EQ(slow.coordinate(3, kPipeline), 0);
  EXPECT_EQ(slow.shape().size(kPipeline), 1);
}

TEST(MeshLayout, BadShapesAreNamed) {
  EXPECT_THROW_WITH(MeshShape({{kData, 2}, {kData, 2}}), dtlab::Error, "names the axis 'data' twice");
  EXPECT_THROW_WITH(MeshShape({{kTensor, 0}}), dtlab::Error, "axis 'tensor' has size 0");
  EXPECT_THROW_WITH(MeshShape(std::vector<Axis>{}), dtlab::Error, "at least one axis");
  EXPECT_THROW_WITH(MeshShape::ordered({{"sequence", 2}}), dtlab::Error, "axis 'sequence' is not in its order");
  EXPECT_THROW_WITH(megatron(2, 1, 2).coordinates(4), dtlab::Error, "rank 4 is not in the device mesh");
  EXPECT_THROW_WITH(megatron(2, 1, 2).rank_of({0, 2, 0}), dtlab::Error, "are not in the device mesh");
}

TEST(DeviceMesh, EachAxisReducesOverItsGroup) {
  dtlab::test::run_ranks(8, [](dtlab::dist::Group& world) {
    dtlab::mesh::DeviceMesh mesh(world, MeshShape::ordered({{kData, 2}, {kPipeline, 2}, {kTensor, 2}}));
    const int r = world.rank();
    for (const std::string axis : {kData, kPipeline, kTensor}) {
      EXPECT_EQ(mesh.group(axis).size(), 2);
      EXPECT_EQ(mesh.group(axis).rank(), mesh.coordinate(axis)) << axis;
      torch::Tensor t = torch::full({1}, double(r));
      mesh.group(axis).all_reduce(t, dtlab::dist::ReduceOp::SUM, axis);
      double want = 0;
      for (int member : mesh.layout().group(r, axis)) want += member;
      EXPECT_EQ(t.item<double>(), want) << axis << " at rank " << r;
    }
    if (r == 5) {
      EXPECT_EQ(mesh.layout().coordinates(r), (std::vector<int>{1, 0, 1}));
      EXPECT_EQ(mesh.layout().group(r, kData), (std::vector<int>{5, 7}));
    }
    EXPECT_THROW_WITH(mesh.group("context"), dtlab::Error, "has no 'context' axis");
  });
}

// cp's mesh: data x context in Megatron's order, context the faster axis, so that a context group's
// ranks are neighbours; a ring over the context group (dist::ring_step_async, what ring attention
// moves its keys with) passes each rank's tensor to the next rank of its own group only.
TEST(DeviceMesh, ContextGroupsAreNeighboursAndTheirRingStaysInside) {
  const MeshLayout layout(MeshShape::ordered({{kData, 2}, {dtlab::mesh::kContext, 3}}));
  EXPECT_EQ(layout.shape().describe(), "data 2 x context 3");
  EXPECT_EQ(layout.groups(dtlab::mesh::kContext), (Groups{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(layout.groups(kData), (Groups{{0, 3}, {1, 4}, {2, 5}}));
  dtlab::test::run_ranks(6, [](dtlab::dist::Group& world) {
    dtlab::mesh::DeviceMesh mesh(world, MeshShape::ordered({{kData, 2}, {dtlab::mesh::kContext, 3}}), "cp");
    dtlab::dist::Group& context = mesh.group(dtlab::mesh::kContext);
    const torch::Tensor mine = torch::full({4}, double(world.rank()));
    torch::Tensor got = torch::empty_like(mine);
    dtlab::dist::ring_step_async(mine, got, context, "ring").wait();
    const std::vector<int> members = mesh.layout().group(world.rank(), dtlab::mesh::kContext);
    const int previous = members[static_cast<size_t>((context.rank() + 2) % 3)];
    EXPECT_TRUE(torch::equal(got, torch::full({4}, double(previous)))) << "rank " << world.rank();
  });
}

// dp's and zero's mesh: one data axis, whose group is the world itself (no group made).
TEST(DeviceMesh, AnAxisThatSpansTheWorldIsTheWorld) {
  dtlab::test::run_ranks(3, [](dtlab::dist::Group& world) {
    dtlab::mesh::DeviceMesh mesh(world, MeshShape({{kData, 3}, {kTensor, 1}}));
    EXPECT_EQ(&mesh.group(kData), &world);
    EXPECT_EQ(mesh.group(kTensor).size(), 1);
    EXPECT_EQ(mesh.coordinate(kData), world.rank());
  });
}

// A layout given rank by rank (the mesh exercise's, from the student's coordinates) is held to
// placing every rank of the shape once, and its groups follow its coordinates.
TEST(MeshLayout, ATableMustPlaceEveryRankOnce) {
  const MeshShape shape({{"a", 2}, {"b", 2}});
  const MeshLayout columns(shape, {{0, 0}, {1, 0}, {0, 1}, {1, 1}});  // "a" turns fastest
  EXPECT_EQ(columns.group(0, "a"), (std::vector<int>{0, 1}));
  EXPECT_EQ(columns.group(0, "b"), (std::vector<int>{0, 2}));
  EXPECT_THROW_WITH(MeshLayout(shape, {{0, 0}, {0, 1}, {1, 0}}), dtlab::Error, "lists 3 ranks, not its 4");
  EXPECT_THROW_WITH(MeshLayout(shape, {{0, 0}, {0, 1}, {1, 0}, {0, 1}}), dtlab::Error,
                    "ranks 1 and 3 both sit at (0, 1)");
  EXPECT_THROW_WITH(MeshLayout(shape, {{0, 0}, {0, 1}, {1, 0}, {1, 2}}), dtlab::Error,
                    "its b coordinate 2 is outside 0 to 1");
  EXPECT_THROW_WITH(MeshLayout(shape, {{0, 0}, {0, 1}, {1, 0}, {1}}), dtlab::Error, "one for each of its 2 axes");
}

// An axis that spans the world in another order than the world's is a group of its own: its
// ranks count by their coordinate, which a reduction does not show but a ring step does.
TEST(DeviceMesh, AnAxisThatSpansTheWorldOutOfOrderIsAGroupOfItsOwn) {
  dtlab::test::run_ranks(3, [](dtlab::dist::Group& world) {
    dtlab::mesh::DeviceMesh mesh(world, MeshLayout(MeshShape({{kData, 3}}), {{2}, {1}, {0}}));
    EXPECT_NE(&mesh.group(kData), &world);
    EXPECT_EQ(mesh.group(kData).rank(), 2 - world.rank());
    torch::Tensor t = torch::full({1}, static_cast<float>(world.rank()));
    mesh.group(kData).all_reduce(t, dtlab::dist::ReduceOp::SUM, "test");
    EXPECT_EQ(t.item<float>(), 3.f);
  });
}

TEST(DeviceMesh, AShapeThatIsNotTheWorldIsRefusedOnEveryRank) {
  dtlab::test::run_ranks(4, [](dtlab::dist::Group& world) {
    EXPECT_THROW_WITH(dtlab::mesh::DeviceMesh(world, MeshShape({{kData, 3}})), dtlab::Error,
                      "the device mesh data 3 holds 3 ranks, the world 4");
  });
}

}  // namespace mesh_test
