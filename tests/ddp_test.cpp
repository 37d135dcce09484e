// dist::DistributedDataParallel: the bucket layout (Note [Bucket order] in dist/ddp.h), the
// initial broadcast, frozen, unused and tied parameters, no_sync, and the CommLog of a step.
// Ranks are threads of this process (dist_test_util.h); the models are small MLPs so that a
// serial reference gradient is cheap.
#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "dist_test_util.h"
#include "dtlab/core/error.h"
#include "dtlab/dist/ddp.h"
#include "test_util.h"

// Everything in a namespace named after the file (no anonymous namespace): the unit suites share
// one binary, compiled in groups of files (Note [Unity builds] in cmake/Dtlab.cmake), so helpers
// must not collide, and a TEST_F class must not derive from a type of an anonymous namespace.
namespace ddp_test {

using dtlab::dist::BucketLayout;
using dtlab::dist::compute_bucket_layout;
using dtlab::dist::DdpOptions;
using dtlab::dist::DistributedDataParallel;
using dtlab::dist::Group;
using dtlab::test::flat_grads;
using dtlab::test::run_ranks;
using dtlab::test::shard_rows;
using Indices = std::vector<size_t>;

constexpr int64_t kBatch = 8;  // global batch, split evenly over 1, 2 or 4 ranks

// Builds a module from the global generator seeded with `seed`, one thread at a time.
template <typename F>
auto seeded(uint64_t seed, F make) {
  std::lock_guard<std::mutex> lock(dtlab::test::global_generator_mutex());
  torch::manual_seed(seed);
  return make();
}

torch::nn::Sequential mlp(uint64_t seed) {
  return seeded(seed, [] {
    return torch::nn::Sequential(torch::nn::Linear(4, 8), torch::nn::Tanh(), torch::nn::Linear(8, 8),
                                 torch::nn::Tanh(), torch::nn::Linear(8, 2));
  });
}

struct Data {
  torch::Tensor x, y;
};

// A fixed global batch (its own generator, so threads drawing elsewhere do not change it).
Data global_batch(uint64_t seed, int64_t rows = kBatch) {
  auto gen = at::detail::createCPUGenerator(seed);
  return {torch::randn({rows, 4}, gen), torch::randn({rows, 2}, gen)};
}

torch::Tensor mse(const torch::Tensor& out, const torch::Tensor& y) {
  return torch::nn::functional::mse_loss(out, y);  // mean: the average of equal shards' means is the global mean
}

// Gradients of the whole batch in one process, without DDP.
torch::Tensor serial_gradient(torch::nn::Sequential model, const Data& d) {
  model->zero_grad();
  mse(model->forward(d.x), d.y).backward();
  return flat_grads(model->parameters());
}

std::vector<Indices> parameters_of(const std::vector<BucketLayout>& layout) {
  std::vector<Indices> out;
  for (const auto& b : layout) out.push_back(b.parameters);
  return out;
}

// Tolerances for "equal to the serial gradient": the ranks' float sums are added in another
// order than the serial batch's, so the last bits differ.
::testing::AssertionResult close(const torch::Tensor& a, const torch::Tensor& b) {
  if (torch::allclose(a, b, /*rtol=*/1e-5, /*atol=*/1e-6)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max |difference| " << (a - b).abs().max().item<double>();
}

// ---------------------------------------------------------------------------------------------
// compute_bucket_layout in closed form

TEST(BucketLayout, ClosedForm) {
  struct Case {
    const char* what;
    std::vector<int64_t> bytes;
    int64_t cap, first;
    std::vector<Indices> buckets;
    std::vector<int64_t> bucket_bytes;
  };
  const int64_t gb = 1000 * 1000 * 1000;
  const Case cases[] = {
      // Reverse order; the first bucket closes at >= 1 MiB (3 x 409600 = 1228800), the next at
      // >= 1 MB (likewise after 3 parameters).
      {"six parameters of 400 KB", std::vector<int64_t>(6, 400 * 1024), 1000 * 1000, 1024 * 1024,
       {{5, 4, 3}, {2, 1, 0}}, {3 * 400 * 1024, 3 * 400 * 1024}},
      {"the last bucket holds the rest", std::vector<int64_t>(7, 400 * 1024), 1000 * 1000, 1024 * 1024,
       {{6, 5, 4}, {3, 2, 1}, {0}}, {3 * 400 * 1024, 3 * 400 * 1024, 400 * 1024}},
      // 300 KB each: the first bucket closes after 4 (1.2 MB >= 1 MiB), the others after 9
      // (2.7 MB >= 2.5 MB).
      {"the first bucket is smaller than the cap", std::vector<int64_t>(14, 300 * 1000), 2500 * 1000,
       1024 * 1024, {{13, 12, 11, 10}, {9, 8, 7, 6, 5, 4, 3, 2, 1}, {0}},
       {4 * 300 * 1000, 9 * 300 * 1000, 300 * 1000}},
      {"a bucket may exceed its cap by its last parameter", {100, 5000000, 50, 50},
       dtlab::dist::kDefaultBucketBytesCap, dtlab::dist::kFirstBucketBytes, {{3, 2, 1}, {0}}, {5000100, 100}},
      {"a cap of one byte gives one bucket per parameter", {8, 16, 4}, 1, 1, {{2}, {1}, {0}}, {4, 16, 8}},
      {"a huge cap gives one bucket", {8, 16, 4}, gb, gb, {{2, 1, 0}}, {28}},
      {"no parameters, no buckets", {}, gb, gb, {}, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const auto layout = compute_bucket_layout(c.bytes, c.cap, c.first);
    EXPECT_EQ(parameters_of(layout), c.buckets);
    std::vector<int64_t> bytes;
    for (const auto& b : layout) bytes.push_back(b.bytes);
    EXPECT_EQ(bytes, c.bucket_bytes);
  }
}

TEST(BucketLayout, OfASmallSequentialModel) {
  // Linear(4,8), Linear(8,8), Linear(8,2): parameters 0.weight 128 B, 0.bias 32 B, 1.weight
  // 256 B, 1.bias 32 B, 2.weight 64 B, 2.bias 8 B. First bucket 100 B, cap 280 B:
  //   bucket 0: 2.bias 2.weight 1.bias (8 + 64 + 32 = 104 >= 100)
  //   bucket 1: 1.weight 0.bias        (256 + 32 = 288 >= 280)
  //   bucket 2: 0.weight               (128)
  run_ranks(1, [&](Group& g) {
    auto model = seeded(1, [] {
      return torch::nn::Sequential(torch::nn::Linear(4, 8), torch::nn::Linear(8, 8), torch::nn::Linear(8, 2));
    });
    DdpOptions o;
    o.first_bucket_bytes = 100;
    o.bucket_cap_bytes = 280;
    DistributedDataParallel ddp(model.ptr(), g, o);
    EXPECT_EQ(parameters_of(ddp.buckets()), (std::vector<Indices>{{5, 4, 3}, {2, 1}, {0}}));
    ASSERT_EQ(ddp.buckets().size(), 3u);
    EXPECT_EQ(ddp.buckets()[0].bytes, 104);
    EXPECT_EQ(ddp.buckets()[1].bytes, 288);
    EXPECT_EQ(ddp.buckets()[2].bytes, 128);

    const auto named = model->named_parameters();
    std::vector<std::vector<std::string>> names;
    for (const auto& b : ddp.buckets()) {
      names.emplace_back();
      for (size_t i : b.parameters) names.back().push_back(named[i].key());
    }
    EXPECT_EQ(names, (std::vector<std::vector<std::string>>{
                         {"2.bias", "2.weight", "1.bias"}, {"1.weight", "0.bias"}, {"0.weight"}}));
  });
}

TEST(BucketLayout, DefaultOptionsPutASmallModelInOneBucket) {
  run_ranks(1, [&](Group& g) {
    auto model = mlp(1);
    DistributedDataParallel ddp(model.ptr(), g);
    EXPECT_EQ(parameters_of(ddp.buckets()), (std::vector<Indices>{{5, 4, 3, 2, 1, 0}}));
  });
}

// ---------------------------------------------------------------------------------------------
// Gradients

TEST(Ddp, GradientsEqualTheFullBatchOnEveryWorldSize) {
  const Data data = global_batch(7);
  const torch::Tensor expected = serial_gradient(mlp(3), data);
  for (int world : {1, 2, 4}) {
    std::vector<torch::Tensor> grads(world);
    run_ranks(world, [&](Group& g) {
      auto model = mlp(3);
      DistributedDataParallel ddp(model.ptr(), g);
      const int r = g.rank();
      mse(model->forward(shard_rows(data.x, r, world)), shard_rows(data.y, r, world)).backward();
      grads[r] = flat_grads(model->parameters());
    });
    for (int r = 0; r < world; ++r) {
      EXPECT_TRUE(torch::equal(grads[r], grads[0])) << "world " << world << ": rank " << r << " differs from rank 0";
      EXPECT_TRUE(close(grads[r], expected)) << "world " << world << ", rank " << r;
    }
  }
}

TEST(Ddp, BucketCapDoesNotChangeTheGradients) {
  // With 2 ranks every element is one float addition a + b, whichever bucket carries it, so
  // the averages must be bitwise identical.
  const Data data = global_batch(8);
  std::map<int64_t, std::vector<torch::Tensor>> grads;
  for (int64_t cap : {int64_t{1}, int64_t{1000} * 1000 * 1000}) {
    grads[cap].resize(2);
    size_t buckets = 0;
    run_ranks(2, [&](Group& g) {
      auto model = mlp(4);
      DdpOptions o;
      o.bucket_cap_bytes = cap;
      o.first_bucket_bytes = cap;
      DistributedDataParallel ddp(model.ptr(), g, o);
      if (g.rank() == 0) buckets = ddp.buckets().size();
      mse(model->forward(shard_rows(data.x, g.rank(), 2)), shard_rows(data.y, g.rank(), 2)).backward();
      grads[cap][g.rank()] = flat_grads(model->parameters());
    });
    EXPECT_EQ(buckets, cap == 1 ? 6u : 1u);
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(torch::equal(grads[1][r], grads[1000 * 1000 * 1000][r])) << "rank " << r;
  }
  EXPECT_TRUE(close(grads[1][0], serial_gradient(mlp(4), data)));
}

TEST(Ddp, SecondStepAlsoSynchronises) {
  // The per-backward state is reset: a second iteration (after zero_grad) averages again.
  const Data data = global_batch(9);
  auto reference = mlp(5);
  serial_gradient(reference, data);
  const torch::Tensor expected = serial_gradient(reference, data);  // zero_grad'ed in between
  std::vector<torch::Tensor> grads(2);
  run_ranks(2, [&](Group& g) {
    auto model = mlp(5);
    DistributedDataParallel ddp(model.ptr(), g);
    for (int step = 0; step < 2; ++step) {
      model->zero_grad();
      mse(model->forward(shard_rows(data.x, g.rank(), 2)), shard_rows(data.y, g.rank(), 2)).backward();
    }
    grads[g.rank()] = flat_grads(model->parameters());
  });
  EXPECT_TRUE(torch::equal(grads[0], grads[1]));
  EXPECT_TRUE(close(grads[0], expected));
}

// ---------------------------------------------------------------------------------------------
// Initial broadcast

TEST(Ddp, DifferentSeedsAgreeAfterConstruction) {
  const int world = 4;
  std::vector<std::vector<torch::Tensor>> before(world), after(world);
  std::vector<std::vector<torch::Tensor>> buffers(world);
  run_ranks(world, [&](Group& g) {
    const int r = g.rank();
    auto model = seeded(100 + r, [] {
      return torch::nn::Sequential(torch::nn::Linear(4, 8), torch::nn::BatchNorm1d(8), torch::nn::Linear(8, 2));
    });
    {
      torch::NoGradGuard no_grad;
      for (auto& b : model->buffers()) {
        if (b.is_floating_point()) b.fill_(static_cast<float>(r + 1));  // running stats differ too
      }
    }
    for (const auto& p : model->parameters()) before[r].push_back(p.detach().clone());
    DistributedDataParallel ddp(model.ptr(), g);
    for (const auto& p : model->parameters()) after[r].push_back(p.detach().clone());
    for (const auto& b : model->buffers()) buffers[r].push_back(b.detach().clone());
  });
  ASSERT_FALSE(torch::equal(before[0][0], before[1][0])) << "the seeds should give different weights";
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(after[r].size(), before[0].size());
    for (size_t k = 0; k < after[r].size(); ++k) {
      EXPECT_TRUE(torch::equal(after[r][k], before[0][k])) << "rank " << r << ", parameter " << k;
    }
    for (size_t k = 0; k < buffers[r].size(); ++k) {
      EXPECT_TRUE(torch::equal(buffers[r][k], buffers[0][k])) << "rank " << r << ", buffer " << k;
      if (buffers[r][k].is_floating_point()) {
        EXPECT_TRUE(torch::equal(buffers[r][k], torch::ones_like(buffers[r][k]))) << "rank 0's buffer";
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Frozen, unused and tied parameters

TEST(Ddp, FrozenParameterIsInNoBucketAndGetsNoGradient) {
  // The first layer's weight is frozen (as one freezes embeddings). BucketLayout::parameters are
  // indices into the module's parameters() (dist/ddp.h), so index 0 must be in no bucket and
  // 1..5 in exactly one.
  const Data data = global_batch(10);
  std::vector<torch::Tensor> grads(2);
  run_ranks(2, [&](Group& g) {
    auto model = mlp(6);
    model->parameters()[0].requires_grad_(false);
    DistributedDataParallel ddp(model.ptr(), g);
    std::multiset<size_t> seen;
    for (const auto& b : ddp.buckets()) seen.insert(b.parameters.begin(), b.parameters.end());
    EXPECT_EQ(seen, (std::multiset<size_t>{1, 2, 3, 4, 5}));
    int64_t bytes = 0;
    for (const auto& b : ddp.buckets()) bytes += b.bytes;
    EXPECT_EQ(bytes, (8 + 64 + 8 + 16 + 2) * 4);  // everything but 0.weight (32 floats)

    mse(model->forward(shard_rows(data.x, g.rank(), 2)), shard_rows(data.y, g.rank(), 2)).backward();
    const auto params = model->parameters();
    EXPECT_FALSE(params[0].grad().defined());
    grads[g.rank()] = flat_grads({params.begin() + 1, params.end()});
  });
  auto reference = mlp(6);
  reference->parameters()[0].requires_grad_(false);
  reference->zero_grad();
  mse(reference->forward(data.x), data.y).backward();
  const auto params = reference->parameters();
  const torch::Tensor expected = flat_grads({params.begin() + 1, params.end()});
  EXPECT_TRUE(torch::equal(grads[0], grads[1]));
  EXPECT_TRUE(close(grads[0], expected));
}

// A model whose `unused` layer takes no part in forward.
struct WithUnusedImpl : torch::nn::Module {
  WithUnusedImpl() {
    used = register_module("used", torch::nn::Linear(4, 2));
    unused = register_module("unused", torch::nn::Linear(4, 2));
  }
  torch::Tensor forward(const torch::Tensor& x) { return used->forward(x); }
  torch::nn::Linear used{nullptr}, unused{nullptr};
};
TORCH_MODULE(WithUnused);

TEST(Ddp, UnusedParameterIsAnErrorNamingIt) {
  const Data data = global_batch(11);
  run_ranks(2, [&](Group& g) {
    auto model = seeded(7, [] { return WithUnused(); });
    DistributedDataParallel ddp(model.ptr(), g);
    const torch::Tensor loss = mse(model->forward(shard_rows(data.x, g.rank(), 2)), shard_rows(data.y, g.rank(), 2));
    EXPECT_THROW_WITH(loss.backward(), dtlab::Error, "unused.weight");
    EXPECT_THROW_WITH(
        mse(model->forward(shard_rows(data.x, g.rank(), 2)), shard_rows(data.y, g.rank(), 2)).backward(),
        dtlab::Error, "find_unused_parameters");
  });
}

TEST(Ddp, UnusedParameterWithFindUnusedGetsZeroGradient) {
  const Data data = global_batch(12);
  std::vector<torch::Tensor> used_grads(2);
  run_ranks(2, [&](Group& g) {
    auto model = seeded(7, [] { return WithUnused(); });
    DdpOptions o;
    o.find_unused_parameters = true;
    DistributedDataParallel ddp(model.ptr(), g, o);
    for (int step = 0; step < 2; ++step) {  // and again: the state is reset after such a step
      model->zero_grad();
      mse(model->forward(shard_rows(data.x, g.rank(), 2)), shard_rows(data.y, g.rank(), 2)).backward();
    }
    for (const auto& p : model->unused->parameters()) {
      ASSERT_TRUE(p.grad().defined());
      EXPECT_TRUE(torch::equal(p.grad(), torch::zeros_like(p)));
    }
    used_grads[g.rank()] = flat_grads(model->used->parameters());
  });
  auto reference = seeded(7, [] { return WithUnused(); });
  mse(reference->forward(data.x), data.y).backward();
  EXPECT_TRUE(torch::equal(used_grads[0], used_grads[1]));
  EXPECT_TRUE(close(used_grads[0], flat_grads(reference->used->parameters())));
}

// Holds a tensor that another module holds too (tied weights, as a decoder tied to embeddings).
struct HolderImpl : torch::nn::Module {
  explicit HolderImpl(torch::Tensor w) { weight = register_parameter("weight", std::move(w)); }
  torch::Tensor weight;
};
TORCH_MODULE(Holder);

struct TiedImpl : torch::nn::Module {
  TiedImpl() {
    const torch::Tensor w = torch::randn({4, 4}) * 0.5;
    first = register_module("first", Holder(w));
    mid = register_module("mid", torch::nn::Linear(4, 4));
    last = register_module("last", Holder(w));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const torch::Tensor h = torch::tanh(mid->forward(torch::tanh(x.matmul(first->weight.t()))));
    return h.matmul(last->weight).narrow(1, 0, 2);
  }
  Holder first{nullptr}, last{nullptr};
  torch::nn::Linear mid{nullptr};
};
TORCH_MODULE(Tied);

TEST(Ddp, TiedWeightsAreReducedOnceAndEqualTheFullBatch) {
  const Data data = global_batch(13);
  std::vector<torch::Tensor> grads(2);
  run_ranks(2, [&](Group& g) {
    auto model = seeded(8, [] { return Tied(); });
    ASSERT_EQ(model->parameters().size(), 4u);  // first.weight, mid.weight, mid.bias, last.weight
    ASSERT_TRUE(model->first->weight.is_same(model->last->weight));
    DistributedDataParallel ddp(model.ptr(), g);
    size_t in_buckets = 0;
    int64_t bucket_bytes = 0;
    for (const auto& b : ddp.buckets()) {
      in_buckets += b.parameters.size();
      bucket_bytes += b.bytes;
    }
    EXPECT_EQ(in_buckets, 3u);
    EXPECT_EQ(bucket_bytes, (16 + 16 + 4) * 4);
    g.log().clear();
    mse(model->forward(shard_rows(data.x, g.rank(), 2)), shard_rows(data.y, g.rank(), 2)).backward();
    EXPECT_EQ(g.log().bytes("all_reduce"), (16 + 16 + 4) * 4);  // the tied weight once
    grads[g.rank()] = flat_grads({model->first->weight, model->mid->weight, model->mid->bias});
  });
  auto reference = seeded(8, [] { return Tied(); });
  mse(reference->forward(data.x), data.y).backward();
  const torch::Tensor expected = flat_grads({reference->first->weight, reference->mid->weight, reference->mid->bias});
  EXPECT_TRUE(torch::equal(grads[0], grads[1]));
  EXPECT_TRUE(close(grads[0], expected));
}

// ---------------------------------------------------------------------------------------------
// no_sync and the CommLog

TEST(Ddp, NoSyncAccumulatesAndTheNextBackwardAveragesTheSum) {
  // Each rank runs three micro-batches (two under no_sync, one outside). Expected: the average
  // over ranks of the sum of each rank's three local gradients, computed serially.
  const int world = 2;
  const Data data = global_batch(14, /*rows=*/3 * kBatch);
  auto micro = [&](const torch::Tensor& t, int rank, int k) {
    return shard_rows(t.slice(0, k * kBatch, (k + 1) * kBatch), rank, world);
  };
  torch::Tensor expected;
  std::vector<torch::Tensor> local_sums(world);
  for (int r = 0; r < world; ++r) {
    auto reference = mlp(9);
    for (int k = 0; k < 3; ++k) mse(reference->forward(micro(data.x, r, k)), micro(data.y, r, k)).backward();
    local_sums[r] = flat_grads(reference->parameters());
    expected = r == 0 ? local_sums[r].clone() : expected + local_sums[r];
  }
  expected = expected / world;

  std::vector<torch::Tensor> grads(world);
  run_ranks(world, [&](Group& g) {
    const int r = g.rank();
    auto model = mlp(9);
    DdpOptions o;
    o.first_bucket_bytes = 100;
    o.bucket_cap_bytes = 280;  // several buckets
    DistributedDataParallel ddp(model.ptr(), g, o);
    g.log().clear();
    {
      auto guard = ddp.no_sync();
      for (int k = 0; k < 2; ++k) mse(model->forward(micro(data.x, r, k)), micro(data.y, r, k)).backward();
    }
    EXPECT_TRUE(g.log().records().empty()) << "no_sync must not communicate";
    mse(model->forward(micro(data.x, r, 2)), micro(data.y, r, 2)).backward();
    EXPECT_EQ(g.log().records().size(), ddp.buckets().size());
    grads[r] = flat_grads(model->parameters());
  });
  EXPECT_FALSE(torch::allclose(local_sums[0], local_sums[1])) << "the ranks' sums should differ";
  EXPECT_TRUE(torch::equal(grads[0], grads[1]));
  EXPECT_TRUE(close(grads[0], expected));
}

TEST(Ddp, NoSyncBackwardKeepsLocalGradients) {
  const Data data = global_batch(15);
  std::vector<torch::Tensor> grads(2);
  run_ranks(2, [&](Group& g) {
    auto model = mlp(10);
    DistributedDataParallel ddp(model.ptr(), g);
    auto guard = ddp.no_sync();
    mse(model->forward(shard_rows(data.x, g.rank(), 2)), shard_rows(data.y, g.rank(), 2)).backward();
    grads[g.rank()] = flat_grads(model->parameters());
  });
  for (int r = 0; r < 2; ++r) {
    auto reference = mlp(10);
    const Data shard{shard_rows(data.x, r, 2), shard_rows(data.y, r, 2)};
    EXPECT_TRUE(torch::equal(grads[r], serial_gradient(reference, shard))) << "rank " << r;
  }
}

TEST(Ddp, CommLogHasOneAllReducePerBucketPerBackward) {
  run_ranks(2, [&](Group& g) {
    const Data data = global_batch(16);
    auto model = mlp(11);
    DdpOptions o;
    o.first_bucket_bytes = 100;
    o.bucket_cap_bytes = 280;
    DistributedDataParallel ddp(model.ptr(), g, o);
    // The construction broadcast: every parameter once, as float32.
    {
      const auto records = g.log().records();
      ASSERT_EQ(records.size(), 1u);
      EXPECT_EQ(records[0].op, "broadcast");
      int64_t numel = 0;
      for (const auto& p : model->parameters()) numel += p.numel();
      EXPECT_EQ(records[0].bytes, numel * 4);
    }
    // Layout of mlp: 0.weight 128 B, 0.bias 32, 2.weight 256, 2.bias 32, 4.weight 64, 4.bias 8.
    ASSERT_EQ(parameters_of(ddp.buckets()), (std::vector<Indices>{{5, 4, 3}, {2, 1}, {0}}));
    g.log().clear();
    const int steps = 2;
    for (int step = 0; step < steps; ++step) {
      model->zero_grad();
      mse(model->forward(shard_rows(data.x, g.rank(), 2)), shard_rows(data.y, g.rank(), 2)).backward();
    }
    const auto records = g.log().records();
    ASSERT_EQ(records.size(), steps * ddp.buckets().size());
    for (size_t k = 0; k < records.size(); ++k) {
      const size_t b = k % ddp.buckets().size();
      SCOPED_TRACE("record " + std::to_string(k));
      EXPECT_EQ(records[k].op, "all_reduce");
      EXPECT_EQ(records[k].tag, "ddp bucket " + std::to_string(b));
      EXPECT_EQ(records[k].bytes, ddp.buckets()[b].bytes);
      EXPECT_EQ(records[k].shape, (std::vector<int64_t>{ddp.buckets()[b].bytes / 4}));
    }
    EXPECT_EQ(g.log().bytes("all_reduce", "ddp bucket"), steps * (128 + 32 + 256 + 32 + 64 + 8));
    EXPECT_GE(ddp.last_wait_seconds(), 0.0);
  });
}

TEST(Ddp, NonPositiveBucketSizeIsAnError) {
  run_ranks(1, [&](Group& g) {
    auto model = mlp(1);
    DdpOptions o;
    o.bucket_cap_bytes = 0;
    EXPECT_THROW_WITH(DistributedDataParallel(model.ptr(), g, o), dtlab::Error, "positive");
  });
}

}  // namespace ddp_test
