// shard_indices is PyTorch's DistributedSampler (drop_last=False) and minibatches splits a shard
// into batches. The structural properties are checked for several (N, world) pairs, and the
// exact order against lists produced by PyTorch 1.13 itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/data/sampler.h"
#include "test_util.h"

// Everything in a namespace named after the file (no anonymous namespace): the unit suites share
// one binary, compiled in groups of files (Note [Unity builds] in cmake/Dtlab.cmake), so helpers
// must not collide, and a TEST_F class must not derive from a type of an anonymous namespace.
namespace sampler_test {

using dtlab::data::SamplerOptions;
using Indices = std::vector<int64_t>;

SamplerOptions options(int64_t n, int world, int rank, bool shuffle = true, uint64_t seed = 0) {
  SamplerOptions o;
  o.dataset_size = n;
  o.world_size = world;
  o.rank = rank;
  o.shuffle = shuffle;
  o.seed = seed;
  return o;
}

std::vector<Indices> all_shards(int64_t n, int world, int64_t epoch, bool shuffle = true,
                                uint64_t seed = 0) {
  std::vector<Indices> shards;
  for (int r = 0; r < world; ++r) {
    shards.push_back(dtlab::data::shard_indices(options(n, world, r, shuffle, seed), epoch));
  }
  return shards;
}

struct Case {
  int64_t n;
  int world;
};

// Divisible, not divisible, and fewer examples than ranks.
const Case kCases[] = {{12, 4}, {10, 4}, {7, 3}, {1, 4}, {5, 1}, {3, 2}};

// ---------------------------------------------------------------------------------------------
// Structure

TEST(DistributedSampler, ShardsHaveEqualLengthCeilNOverWorld) {
  for (const Case& c : kCases) {
    // DistributedSampler's num_samples = ceil(N / world), the same for every rank, so that all
    // ranks run the same number of steps (else a collective would hang).
    const int64_t expected = (c.n + c.world - 1) / c.world;
    for (const Indices& shard : all_shards(c.n, c.world, 0)) {
      EXPECT_EQ(static_cast<int64_t>(shard.size()), expected) << "N=" << c.n << " world=" << c.world;
    }
  }
}

TEST(DistributedSampler, ShardsAreDisjointAndCoverTheDataSetButForThePadding) {
  for (const Case& c : kCases) {
    for (bool shuffle : {true, false}) {
      const int64_t total = (c.n + c.world - 1) / c.world * c.world;
      std::map<int64_t, int64_t> count;
      for (const Indices& shard : all_shards(c.n, c.world, 3, shuffle, 11)) {
        for (int64_t i : shard) ++count[i];
      }
      // Every index of 0..N-1 is read, nothing else is.
      ASSERT_EQ(static_cast<int64_t>(count.size()), c.n) << "N=" << c.n << " world=" << c.world;
      EXPECT_EQ(count.begin()->first, 0);
      EXPECT_EQ(count.rbegin()->first, c.n - 1);
      // The shards overlap only in the total - N padded copies.
      int64_t duplicates = 0;
      for (const auto& [index, times] : count) duplicates += times - 1;
      EXPECT_EQ(duplicates, total - c.n)
          << "N=" << c.n << " world=" << c.world << " shuffle=" << shuffle;
    }
  }
}

TEST(DistributedSampler, PaddingRepeatsTheStartOfThePermutation) {
  // N=10, world=4: total 12, so the first two indices of the epoch's order are read twice: by
  // ranks 0 and 1 (positions 0, 1) and again by ranks 2 and 3 (positions 10, 11).
  const std::vector<Indices> shards = all_shards(10, 4, 0);
  EXPECT_EQ(shards[2].back(), shards[0].front());
  EXPECT_EQ(shards[3].back(), shards[1].front());
  // N=1, world=4: every rank reads the only example.
  for (const Indices& shard : all_shards(1, 4, 5)) EXPECT_EQ(shard, Indices{0});
}

TEST(DistributedSampler, SameSeedAndEpochGiveTheSameShards) {
  for (const Case& c : kCases) {
    EXPECT_EQ(all_shards(c.n, c.world, 2, true, 123), all_shards(c.n, c.world, 2, true, 123))
        << "N=" << c.n << " world=" << c.world;
  }
}

TEST(DistributedSampler, DifferentEpochOrSeedReshuffles) {
  // 100 examples: two random orders coincide with probability 1/100!.
  EXPECT_NE(all_shards(100, 4, 0), all_shards(100, 4, 1));
  EXPECT_NE(all_shards(100, 4, 0, true, 0), all_shards(100, 4, 0, true, 5));
}

TEST(DistributedSampler, WorldOneIsAPermutationOfTheDataSet) {
  const Indices order = dtlab::data::shard_indices(options(50, 1, 0), 4);
  Indices sorted = order;
  std::sort(sorted.begin(), sorted.end());
  Indices identity(50);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(order, identity) << "shuffle=true should not give the identity order";
}

TEST(DistributedSampler, WithoutShuffleRankReadsRankPlusMultiplesOfWorldModuloN) {
  // Order 0..N-1, padded with its start, then every world-th from position rank: index
  // (rank + k * world) mod N for k = 0..ceil(N/world)-1.
  for (const Case& c : kCases) {
    const int64_t per_rank = (c.n + c.world - 1) / c.world;
    for (int r = 0; r < c.world; ++r) {
      Indices expected;
      for (int64_t k = 0; k < per_rank; ++k) expected.push_back((r + k * c.world) % c.n);
      // The epoch must not matter without shuffling.
      EXPECT_EQ(dtlab::data::shard_indices(options(c.n, c.world, r, false), 0), expected);
      EXPECT_EQ(dtlab::data::shard_indices(options(c.n, c.world, r, false, 9), 7), expected);
    }
  }
  EXPECT_EQ(dtlab::data::shard_indices(options(10, 4, 3, false), 0), (Indices{3, 7, 1}));
}

// ---------------------------------------------------------------------------------------------
// Equivalence with PyTorch 1.13

TEST(DistributedSampler, PermutationEqualsTorchRandpermWithTheSameSeed) {
  // From PyTorch 1.13 (.venv-golden):
  //   python -c "import torch; g=torch.Generator(); g.manual_seed(0);
  //              print(torch.randperm(10, generator=g).tolist())"
  EXPECT_EQ(dtlab::data::shard_indices(options(10, 1, 0, true, 0), 0),
            (Indices{4, 1, 7, 5, 3, 9, 0, 8, 6, 2}));
  // The generator is seeded with seed + epoch, so seed 0 in epoch 1 is randperm with seed 1
  // (same command with manual_seed(1)), and so is seed 1 in epoch 0.
  const Indices seed_one = {5, 6, 1, 2, 0, 8, 9, 3, 7, 4};
  EXPECT_EQ(dtlab::data::shard_indices(options(10, 1, 0, true, 0), 1), seed_one);
  EXPECT_EQ(dtlab::data::shard_indices(options(10, 1, 0, true, 1), 0), seed_one);
}

// dp's DataPartitioner shuffles with it: the same draw, without the epoch.
TEST(ShuffledIndices, EqualTorchRandpermWithTheSameSeed) {
  EXPECT_EQ(dtlab::data::shuffled_indices(10, 0), (Indices{4, 1, 7, 5, 3, 9, 0, 8, 6, 2}));
  EXPECT_EQ(dtlab::data::shuffled_indices(10, 1), (Indices{5, 6, 1, 2, 0, 8, 9, 3, 7, 4}));
  EXPECT_TRUE(dtlab::data::shuffled_indices(0, 3).empty());
  EXPECT_THROW_WITH(dtlab::data::shuffled_indices(-1, 0), dtlab::Error, "must not be negative");
}

TEST(DistributedSampler, ShardsEqualPyTorchDistributedSampler) {
  // From PyTorch 1.13's DistributedSampler (.venv-golden):
  //   from torch.utils.data import DistributedSampler
  //   s = DistributedSampler(range(10), num_replicas=4, rank=r, shuffle=True, seed=0)
  //   s.set_epoch(e); print(list(s))          # for e in 0, 1 and r in 0..3
  EXPECT_EQ(all_shards(10, 4, 0, true, 0),
            (std::vector<Indices>{{4, 3, 6}, {1, 9, 2}, {7, 0, 4}, {5, 8, 1}}));
  EXPECT_EQ(all_shards(10, 4, 1, true, 0),
            (std::vector<Indices>{{5, 0, 7}, {6, 8, 4}, {1, 9, 5}, {2, 3, 6}}));
  // DistributedSampler(range(7), num_replicas=3, rank=r, shuffle=True, seed=42), set_epoch(3)
  EXPECT_EQ(all_shards(7, 3, 3, true, 42),
            (std::vector<Indices>{{5, 2, 0}, {3, 4, 5}, {1, 6, 3}}));
  // DistributedSampler(range(1), num_replicas=4, rank=r, shuffle=True, seed=0)
  EXPECT_EQ(all_shards(1, 4, 0, true, 0), (std::vector<Indices>{{0}, {0}, {0}, {0}}));
}

TEST(DistributedSampler, LargerDataSetsEqualPyTorchDistributedSampler) {
  // From PyTorch 1.13's DistributedSampler (.venv-golden), first 8 and last 3 of the shard:
  //   s = DistributedSampler(range(1000), num_replicas=8, rank=5, shuffle=True, seed=3)
  //   s.set_epoch(2); l = list(s); print(len(l), l[:8], l[-3:])
  // and the same with range(1001), rank=7 (125 * 8 + 1: seven padded copies, the last in
  // rank 7's final position).
  const Indices a = dtlab::data::shard_indices(options(1000, 8, 5, true, 3), 2);
  ASSERT_EQ(a.size(), 125u);
  EXPECT_EQ(Indices(a.begin(), a.begin() + 8), (Indices{515, 897, 666, 855, 879, 97, 303, 973}));
  EXPECT_EQ(Indices(a.end() - 3, a.end()), (Indices{412, 173, 389}));
  const Indices b = dtlab::data::shard_indices(options(1001, 8, 7, true, 3), 2);
  ASSERT_EQ(b.size(), 126u);
  EXPECT_EQ(Indices(b.begin(), b.begin() + 8), (Indices{696, 97, 86, 685, 686, 637, 110, 253}));
  EXPECT_EQ(Indices(b.end() - 3, b.end()), (Indices{365, 491, 943}));
}

// ---------------------------------------------------------------------------------------------
// Invalid options

TEST(DistributedSampler, InvalidRankOrWorldSizeIsAnError) {
  EXPECT_THROW_WITH(dtlab::data::shard_indices(options(10, 4, 4), 0), dtlab::Error,
                    "invalid rank 4 for world size 4");
  EXPECT_THROW_WITH(dtlab::data::shard_indices(options(10, 4, -1), 0), dtlab::Error,
                    "invalid rank -1");
  EXPECT_THROW_WITH(dtlab::data::shard_indices(options(10, 0, 0), 0), dtlab::Error,
                    "world size 0");
  EXPECT_THROW_WITH(dtlab::data::shard_indices(options(10, -2, 0), 0), dtlab::Error,
                    "world size -2");
}

TEST(DistributedSampler, EmptyDataSetIsAnError) {
  EXPECT_THROW_WITH(dtlab::data::shard_indices(options(0, 1, 0), 0), dtlab::Error, "empty");
  EXPECT_THROW_WITH(dtlab::data::shard_indices(options(-3, 2, 1), 0), dtlab::Error, "empty");
}

// ---------------------------------------------------------------------------------------------
// minibatches

TEST(Minibatches, SplitsConsecutivelyWithASmallerLastBatch) {
  const Indices indices = {9, 3, 5, 1, 0, 8, 2, 7, 6, 4};
  const auto batches = dtlab::data::minibatches(indices, 4);
  // ceil(10 / 4) = 3 batches of 4, 4 and 10 - 8 = 2.
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0], (Indices{9, 3, 5, 1}));
  EXPECT_EQ(batches[1], (Indices{0, 8, 2, 7}));
  EXPECT_EQ(batches[2], (Indices{6, 4}));
}

TEST(Minibatches, ExactMultipleHasNoPartialBatch) {
  Indices indices(12);
  std::iota(indices.begin(), indices.end(), 0);
  const auto batches = dtlab::data::minibatches(indices, 3);
  ASSERT_EQ(batches.size(), 4u);
  for (size_t b = 0; b < batches.size(); ++b) {
    EXPECT_EQ(batches[b], (Indices{int64_t(3 * b), int64_t(3 * b + 1), int64_t(3 * b + 2)}));
  }
}

TEST(Minibatches, BatchLargerThanTheShardIsOneBatchAndEmptyGivesNone) {
  const Indices indices = {4, 2, 0};
  EXPECT_EQ(dtlab::data::minibatches(indices, 32), (std::vector<Indices>{{4, 2, 0}}));
  EXPECT_EQ(dtlab::data::minibatches(indices, 1), (std::vector<Indices>{{4}, {2}, {0}}));
  EXPECT_TRUE(dtlab::data::minibatches({}, 8).empty());
}

TEST(Minibatches, NonPositiveBatchSizeIsAnError) {
  EXPECT_THROW_WITH(dtlab::data::minibatches({1, 2}, 0), dtlab::Error,
                    "batch size must be positive, got 0");
  EXPECT_THROW_WITH(dtlab::data::minibatches({1, 2}, -4), dtlab::Error, "got -4");
}

}  // namespace sampler_test
