// dist::Group's collectives over Gloo, with the ranks as threads of this process (see
// dist_test_util.h): the results in closed form, the argument checks, and the CommLog records
// that task 4 reads.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "dist_test_util.h"
#include "dtlab/core/error.h"
#include "dtlab/dist/broadcast_state.h"
#include "dtlab/dist/group.h"
#include "dtlab/dist/p2p_order.h"
#include "dtlab/dist/subgroup.h"
#include "dtlab/pipeline/stage_ranks.h"
#include "test_util.h"

// Everything in a namespace named after the file (no anonymous namespace): the unit suites share
// one binary, compiled in groups of files (Note [Unity builds] in cmake/Dtlab.cmake), so helpers
// must not collide, and a TEST_F class must not derive from a type of an anonymous namespace.
namespace collectives_test {

using dtlab::dist::Group;
using dtlab::dist::ReduceOp;
using dtlab::test::run_ranks;

const int kWorlds[] = {1, 2, 4};

// ---------------------------------------------------------------------------------------------
// all_reduce

TEST(AllReduce, SumOfRanksIsTriangularNumberOnEveryRank) {
  for (int world : kWorlds) {
    run_ranks(world, [&](Group& g) {
      torch::Tensor t = torch::full({3, 2}, static_cast<float>(g.rank()));
      g.all_reduce(t, ReduceOp::SUM);
      const float expected = world * (world - 1) / 2.0f;  // 0 + 1 + ... + (world - 1)
      EXPECT_TRUE(torch::equal(t, torch::full({3, 2}, expected))) << "world " << world << ": " << t;
    });
  }
}

TEST(AllReduce, AvgByDivisionIsSumOverWorld) {
  for (int world : kWorlds) {
    run_ranks(world, [&](Group& g) {
      torch::Tensor t = torch::full({5}, static_cast<float>(g.rank()));
      g.all_reduce(t, ReduceOp::AVG_BY_DIVISION);
      const float expected = (world - 1) / 2.0f;  // mean of 0..world-1, exact in float
      EXPECT_TRUE(torch::equal(t, torch::full({5}, expected))) << "world " << world << ": " << t;
    });
  }
}

TEST(AllReduce, MaxAndMin) {
  run_ranks(4, [&](Group& g) {
    torch::Tensor hi = torch::tensor({static_cast<float>(g.rank()), -static_cast<float>(g.rank())});
    torch::Tensor lo = hi.clone();
    g.all_reduce(hi, ReduceOp::MAX);
    g.all_reduce(lo, ReduceOp::MIN);
    EXPECT_TRUE(torch::equal(hi, torch::tensor({3.0f, 0.0f}))) << hi;
    EXPECT_TRUE(torch::equal(lo, torch::tensor({0.0f, -3.0f}))) << lo;
  });
}

TEST(AllReduce, AsyncCompletesOnWait) {
  run_ranks(2, [&](Group& g) {
    torch::Tensor a = torch::full({4}, 1.0f + g.rank());
    torch::Tensor b = torch::full({2}, 10.0f * (g.rank() + 1));
    dtlab::dist::PendingWork wa = g.all_reduce_async(a, "a");
    dtlab::dist::PendingWork wb = g.all_reduce_async(b, "b");
    EXPECT_TRUE(wa.valid());
    wb.wait();
    wa.wait();
    EXPECT_TRUE(torch::equal(a, torch::full({4}, 3.0f)));
    EXPECT_TRUE(torch::equal(b, torch::full({2}, 30.0f)));
    EXPECT_THROW(wa.wait(), dtlab::Error);  // a work item completes once
  });
}

TEST(AllReduce, NonContiguousTensorIsAnError) {
  run_ranks(1, [&](Group& g) {
    torch::Tensor t = torch::zeros({3, 4}).t();
    EXPECT_THROW_WITH(g.all_reduce(t), dtlab::Error, "contiguous");
  });
}

// ---------------------------------------------------------------------------------------------
// gather, scatter, broadcast

TEST(Gather, ToRankZeroInRankOrder) {
  for (int world : kWorlds) {
    run_ranks(world, [&](Group& g) {
      const torch::Tensor mine = torch::full({2, 3}, 100.0f + g.rank());
      std::vector<torch::Tensor> list;
      g.gather(mine, g.rank() == 0 ? &list : nullptr, /*dst=*/0);
      if (g.rank() == 0) {
        ASSERT_EQ(static_cast<int>(list.size()), world);
        for (int r = 0; r < world; ++r) {
          EXPECT_TRUE(torch::equal(list[r], torch::full({2, 3}, 100.0f + r))) << "from rank " << r;
        }
      }
    });
  }
}

TEST(Gather, ToAnotherDestination) {
  run_ranks(4, [&](Group& g) {
    const torch::Tensor mine = torch::tensor({static_cast<float>(g.rank())});
    std::vector<torch::Tensor> list;
    g.gather(mine, g.rank() == 3 ? &list : nullptr, /*dst=*/3);
    if (g.rank() == 3) {
      ASSERT_EQ(list.size(), 4u);
      for (int r = 0; r < 4; ++r) EXPECT_EQ(list[r].item<float>(), r);
    }
  });
}

TEST(Scatter, EveryRankReceivesItsOwn) {
  for (int world : kWorlds) {
    run_ranks(world, [&](Group& g) {
      std::vector<torch::Tensor> list;
      if (g.rank() == 0) {
        for (int r = 0; r < world; ++r) list.push_back(torch::arange(6, torch::kFloat32).view({2, 3}) + 10 * r);
      }
      torch::Tensor mine = torch::zeros({2, 3});
      g.scatter(mine, g.rank() == 0 ? &list : nullptr, /*src=*/0);
      const torch::Tensor expected = torch::arange(6, torch::kFloat32).view({2, 3}) + 10 * g.rank();
      EXPECT_TRUE(torch::equal(mine, expected)) << mine;
    });
  }
}

TEST(Scatter, GatherThenScatterRoundTrip) {
  // What task 2a does: gather to rank 0, compute there, scatter back.
  run_ranks(4, [&](Group& g) {
    torch::Tensor t = torch::full({3}, static_cast<float>(g.rank() + 1));
    std::vector<torch::Tensor> gathered;
    g.gather(t, g.rank() == 0 ? &gathered : nullptr, 0);
    std::vector<torch::Tensor> back;
    if (g.rank() == 0) {
      const torch::Tensor mean = torch::stack(gathered).sum(0).div_(4);
      back.assign(4, mean);
    }
    g.scatter(t, g.rank() == 0 ? &back : nullptr, 0);
    EXPECT_TRUE(torch::equal(t, torch::full({3}, 2.5f))) << t;  // (1 + 2 + 3 + 4) / 4
  });
}

TEST(Broadcast, FromRankTwo) {
  run_ranks(4, [&](Group& g) {
    const torch::Tensor source = torch::arange(8, torch::kFloat32).mul_(0.5);
    torch::Tensor t = g.rank() == 2 ? source.clone() : torch::full({8}, -1.0f);
    g.broadcast(t, /*src=*/2);
    EXPECT_TRUE(torch::equal(t, source)) << t;
  });
}

TEST(Barrier, CompletesOnEveryRank) {
  for (int world : kWorlds) {
    run_ranks(world, [&](Group& g) { g.barrier("test"); });
  }
}

// ---------------------------------------------------------------------------------------------
// Argument checks: each throws on its rank before any communication, so no rank waits.

TEST(Gather, GatherListOnNonDestinationOrBadDestinationIsAnError) {
  run_ranks(2, [&](Group& g) {
    const torch::Tensor t = torch::zeros({2});
    std::vector<torch::Tensor> list;
    if (g.rank() == 1) {
      EXPECT_THROW_WITH(g.gather(t, &list, /*dst=*/0), dtlab::Error, "gather_list");
    } else {
      // And its mirror image: no list on the destination.
      EXPECT_THROW_WITH(g.gather(t, nullptr, /*dst=*/0), dtlab::Error, "gather_list");
    }
  });
  run_ranks(1, [&](Group& g) {
    std::vector<torch::Tensor> list;
    EXPECT_THROW_WITH(g.gather(torch::zeros({1}), &list, /*dst=*/1), dtlab::Error, "destination rank 1");
  });
}

TEST(Scatter, ScatterListOnNonSourceOrOfWrongLengthIsAnError) {
  run_ranks(2, [&](Group& g) {
    torch::Tensor t = torch::zeros({2});
    std::vector<torch::Tensor> list{torch::zeros({2}), torch::zeros({2})};
    if (g.rank() == 1) {
      EXPECT_THROW_WITH(g.scatter(t, &list, /*src=*/0), dtlab::Error, "scatter_list");
    } else {
      EXPECT_THROW_WITH(g.scatter(t, nullptr, /*src=*/0), dtlab::Error, "scatter_list");
    }
  });
  run_ranks(1, [&](Group& g) {
    torch::Tensor t = torch::zeros({2});
    std::vector<torch::Tensor> list{torch::zeros({2}), torch::zeros({2})};
    EXPECT_THROW_WITH(g.scatter(t, &list, /*src=*/0), dtlab::Error, "one per rank (1)");
  });
}

// ---------------------------------------------------------------------------------------------
// all_gather, reduce_scatter

TEST(AllGather, EveryRankReceivesEveryRanksTensorInRankOrder) {
  for (int world : kWorlds) {
    run_ranks(world, [&](Group& g) {
      const torch::Tensor mine = torch::full({2, 3}, static_cast<float>(10 * g.rank() + 1));
      const std::vector<torch::Tensor> all = g.all_gather(mine, "rows");
      ASSERT_EQ(static_cast<int>(all.size()), world);
      for (int r = 0; r < world; ++r) {
        EXPECT_TRUE(torch::equal(all[r], torch::full({2, 3}, static_cast<float>(10 * r + 1)))) << "from rank " << r;
      }
    });
  }
}

// Rank r's inputs[k] = 100 r + k; reduce_scatter gives rank k the sum over r of 100 r + k =
// 100 n(n-1)/2 + n k.
TEST(ReduceScatter, RankKGetsTheSumOfEveryRanksKthInput) {
  for (int world : kWorlds) {
    run_ranks(world, [&](Group& g) {
      std::vector<torch::Tensor> inputs;
      for (int k = 0; k < world; ++k) inputs.push_back(torch::full({4}, static_cast<float>(100 * g.rank() + k)));
      torch::Tensor out = torch::empty({4});
      g.reduce_scatter(out, inputs, ReduceOp::SUM, "shards");
      const float expected = 100.0f * world * (world - 1) / 2 + static_cast<float>(world * g.rank());
      EXPECT_TRUE(torch::equal(out, torch::full({4}, expected))) << "world " << world << ": " << out;
      torch::Tensor avg = torch::empty({4});
      g.reduce_scatter(avg, inputs, ReduceOp::AVG_BY_DIVISION);
      EXPECT_TRUE(torch::allclose(avg, torch::full({4}, expected / world))) << avg;
    });
  }
}

TEST(ReduceScatter, WrongNumberOfInputsIsAnError) {
  run_ranks(2, [&](Group& g) {
    torch::Tensor out = torch::empty({2});
    EXPECT_THROW_WITH(g.reduce_scatter(out, {torch::zeros({2})}), dtlab::Error, "one per rank (2)");
  });
}

// ---------------------------------------------------------------------------------------------
// send, recv

// A ring: every rank sends its number to the next and receives the previous one's, the way a
// pipeline stage hands activations on (sends asynchronous, so no rank blocks the ring).
TEST(SendRecv, ARingPassesEachRanksTensorToTheNext) {
  for (int world : {2, 4}) {
    run_ranks(world, [&](Group& g) {
      const int next = (g.rank() + 1) % world, previous = (g.rank() + world - 1) % world;
      const torch::Tensor mine = torch::full({3}, static_cast<float>(g.rank()));
      dtlab::dist::PendingWork sent = g.send_async(mine, next, "activations");
      torch::Tensor got = torch::empty({3});
      g.recv(got, previous, "activations");
      sent.wait();
      EXPECT_TRUE(torch::equal(got, torch::full({3}, static_cast<float>(previous)))) << got;
    });
  }
}

TEST(SendRecv, MessagesBetweenTwoRanksArriveInOrder) {
  run_ranks(2, [&](Group& g) {
    if (g.rank() == 0) {
      for (int k = 0; k < 5; ++k) g.send(torch::full({2}, static_cast<float>(k)), 1, "micro-batch");
    } else {
      for (int k = 0; k < 5; ++k) {
        torch::Tensor t = torch::empty({2});
        dtlab::dist::PendingWork w = g.recv_async(t, 0, "micro-batch");
        w.wait();
        EXPECT_TRUE(torch::equal(t, torch::full({2}, static_cast<float>(k)))) << "message " << k;
      }
    }
    const auto records = g.log().records();
    ASSERT_EQ(records.size(), 5u);
    EXPECT_EQ(records[0].op, g.rank() == 0 ? "send" : "recv");
    EXPECT_EQ(records[0].bytes, 8);
  });
}

// Note [One stream per pair] (dist/p2p_order.h): two ranks that swap tensors larger than NCCL's
// p2p buffer (4 MiB by default; the pp exercise's tied embedding gradient is 154 MB for GPT-2
// small) hang on NCCL when both post their send first. Gloo completes that order (its sends never
// block the caller, and nothing else here can block them), so no Gloo run can hang for it: the
// test runs the exchange over Gloo at 64 MiB and checks the order both ranks posted, from their
// CommLogs, which is what NCCL's one stream per pair runs.
constexpr int64_t kSwapFloats = 16 << 20;  // 64 MiB

std::vector<std::vector<dtlab::dist::CommRecord>> swap_logs(
    const std::function<void(Group&, torch::Tensor&, torch::Tensor&)>& swap) {
  std::vector<std::vector<dtlab::dist::CommRecord>> logs(2);
  run_ranks(2, [&](Group& g) {
    torch::Tensor mine = torch::full({kSwapFloats}, static_cast<float>(g.rank() + 1));
    torch::Tensor theirs = torch::empty_like(mine);
    swap(g, mine, theirs);
    EXPECT_EQ(theirs[kSwapFloats - 1].item<float>(), static_cast<float>(2 - g.rank()));
    logs[static_cast<size_t>(g.rank())] = g.log().records();
  });
  return logs;
}

TEST(StreamOrder, BothRanksSendingFirstCompletesOnGlooButNcclCouldNotPairIt) {
  const auto logs = swap_logs([](Group& g, torch::Tensor& mine, torch::Tensor& theirs) {
    dtlab::dist::PendingWork sent = g.send_async(mine, 1 - g.rank(), "swap");
    g.recv(theirs, 1 - g.rank(), "swap");
    sent.wait();
  });
  try {
    dtlab::dist::check_stream_order(logs);
    FAIL() << "both ranks sending first passed";
  } catch (const dtlab::Error& e) {
    EXPECT_NE(std::string(e.what()).find("ranks 0 and 1 each post a send as their operation 1 with each other (rank "
                                         "0: send #1 (swap) to rank 1; rank 1: send #1 (swap) to rank 0)"),
              std::string::npos)
        << e.what();
  }
}

TEST(StreamOrder, TheTiedGradientExchangeSendsFromTheLowerRankFirstAndSumsTheSameOnBoth) {
  std::vector<torch::Tensor> sums(2);
  const auto logs = swap_logs([&sums](Group& g, torch::Tensor& mine, torch::Tensor& theirs) {
    torch::Tensor grad = mine.clone();
    dtlab::pipeline::exchange_tied_gradient(g, grad, 1 - g.rank(), /*first_stage=*/g.rank() == 0);
    theirs.fill_(static_cast<float>(2 - g.rank()));  // what swap_logs checks: the exchange sums instead
    sums[static_cast<size_t>(g.rank())] = grad;
  });
  EXPECT_NO_THROW(dtlab::dist::check_stream_order(logs));
  const auto first_posted = [](const std::vector<dtlab::dist::CommRecord>& log) {
    return std::min_element(log.begin(), log.end(), [](const auto& a, const auto& b) { return a.sequence < b.sequence; })
        ->op;
  };
  EXPECT_EQ(first_posted(logs[0]), "send");
  EXPECT_EQ(first_posted(logs[1]), "recv");
  EXPECT_TRUE(torch::equal(sums[0], torch::full({kSwapFloats}, 3.0f)));  // 1 + 2 on both
  EXPECT_TRUE(torch::equal(sums[0], sums[1]));
}

TEST(StreamOrder, OperationsWithoutAMatchAreNamed) {
  std::vector<std::vector<dtlab::dist::CommRecord>> logs(2);
  logs[0].push_back({"send", {2}, "float32", 8, 0, "x", 1, 1});
  EXPECT_THROW(
      {
        try {
          dtlab::dist::check_stream_order(logs);
        } catch (const dtlab::Error& e) {
          EXPECT_NE(std::string(e.what()).find("rank 0 posted 1 operation with rank 1, which posted 0 with it"),
                    std::string::npos) << e.what();
          throw;
        }
      },
      dtlab::Error);
}

TEST(SendRecv, ToItselfOrToNoSuchRankIsAnError) {
  run_ranks(2, [&](Group& g) {
    EXPECT_THROW_WITH(g.send(torch::zeros({1}), g.rank()), dtlab::Error, "cannot send to itself");
    torch::Tensor t = torch::zeros({1});
    EXPECT_THROW_WITH(g.recv(t, 5), dtlab::Error, "rank 5 does not exist (world size 2)");
  });
}

// ---------------------------------------------------------------------------------------------
// Note [A dropped PendingWork] (dist/group.cpp)

// A send_async whose PendingWork is not kept (destroyed before wait()): rank 0's next operation
// names it at once, instead of a receive timing out later with nothing said. The error stays.
TEST(DroppedPendingWork, ASendNotKeptIsNamedByTheRanksNextOperationAtOnce) {
  run_ranks(2, [&](Group& g) {
    if (g.rank() == 0) {
      g.send(torch::zeros({2}), 1, "activation 0");  // operation #1
      { dtlab::dist::PendingWork dropped = g.send_async(torch::ones({2}), 1, "activation 1"); }  // #2
      const auto start = std::chrono::steady_clock::now();
      torch::Tensor grad = torch::empty({2});
      EXPECT_THROW_WITH(g.recv(grad, 1, "gradient 0"), dtlab::DistError,
                        "rank 0: send #2 (activation 1) to rank 1 was never waited for: keep the PendingWork "
                        "that send_async returned and call wait() on it");
      EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
      EXPECT_THROW_WITH(g.barrier("later"), dtlab::DistError, "send #2 (activation 1) to rank 1 was never waited for");
    } else {
      // Only what rank 0 waited for: a dropped send may never arrive (Gloo gives it up).
      torch::Tensor t = torch::empty({2});
      g.recv(t, 0, "activation 0");
    }
  });
}

// A PendingWork overwritten by another before wait() drops the first: named by the next wait().
// A moved-from PendingWork is not a dropped one.
TEST(DroppedPendingWork, AnOverwrittenSendIsNamedByTheNextWaitAndAMovedOneIsNot) {
  run_ranks(2, [&](Group& g) {
    if (g.rank() == 0) {
      dtlab::dist::PendingWork kept = g.send_async(torch::zeros({2}), 1, "activation 0");  // #1
      dtlab::dist::PendingWork moved = std::move(kept);
      moved.wait();  // `kept`, moved from, is empty: nothing was dropped
      dtlab::dist::PendingWork w = g.send_async(torch::ones({2}), 1, "activation 1");  // #2
      w = g.send_async(torch::ones({2}), 1, "activation 2");                              // #3 drops #2
      EXPECT_THROW_WITH(w.wait(), dtlab::DistError, "rank 0: send #2 (activation 1) to rank 1 was never waited for");
    } else {
      torch::Tensor t = torch::empty({2});
      g.recv(t, 0, "activation 0");  // the only send rank 0 waited for
    }
  });
}

// ---------------------------------------------------------------------------------------------
// broadcast_module_state

// Values that float32 cannot hold: an int64 buffer above 2^24 and a float64 buffer with more
// mantissa than float32 has. They must arrive bit for bit.
TEST(BroadcastModuleState, EveryDtypeArrivesExactly) {
  struct StateImpl : torch::nn::Module {
    StateImpl(int rank) {
      weight = register_parameter("weight", torch::full({3}, 0.5f + rank));
      steps = register_buffer("steps", torch::full({2}, int64_t{(int64_t{1} << 40) + 7 + rank}, torch::kInt64));
      mean = register_buffer("mean", torch::full({2}, 1.0 + 1e-12 * (1 + rank), torch::kFloat64));
    }
    torch::Tensor weight, steps, mean;
  };
  run_ranks(4, [&](Group& g) {
    auto m = std::make_shared<StateImpl>(g.rank());
    dtlab::dist::broadcast_module_state(*m, g);
    EXPECT_TRUE(torch::equal(m->weight, torch::full({3}, 0.5f)));
    EXPECT_TRUE(torch::equal(m->steps, torch::full({2}, int64_t{(int64_t{1} << 40) + 7}, torch::kInt64))) << m->steps;
    EXPECT_TRUE(torch::equal(m->mean, torch::full({2}, 1.0 + 1e-12, torch::kFloat64)));
    // One broadcast per dtype, each in its own dtype.
    std::vector<std::string> dtypes;
    for (const auto& r : g.log().records()) dtypes.push_back(r.dtype);
    std::sort(dtypes.begin(), dtypes.end());
    EXPECT_EQ(dtypes, (std::vector<std::string>{"float32", "float64", "int64"}));
  });
}

// ---------------------------------------------------------------------------------------------
// CommLog

TEST(CommLog, RecordsOpShapeDtypeBytesAndTag) {
  run_ranks(2, [&](Group& g) {
    torch::Tensor grads = torch::ones({4, 5});
    g.all_reduce(grads, ReduceOp::SUM, "gradients");
    torch::Tensor loss = torch::ones({1});
    g.all_reduce(loss, ReduceOp::AVG_BY_DIVISION, "loss");
    torch::Tensor b = torch::zeros({7});
    g.broadcast(b, 0, "weights");
    std::vector<torch::Tensor> list;
    g.gather(torch::zeros({3, 2}), g.rank() == 0 ? &list : nullptr, 0, "gradients 2");
    torch::Tensor s = torch::zeros({3, 2});
    g.scatter(s, g.rank() == 0 ? &list : nullptr, 0, "gradients 2");
    g.barrier("end");

    const std::vector<dtlab::dist::CommRecord> records = g.log().records();
    ASSERT_EQ(records.size(), 6u);
    struct Expected {
      const char* op;
      std::vector<int64_t> shape;
      int64_t bytes;
      const char* tag;
    };
    const Expected expected[] = {
        {"all_reduce", {4, 5}, 20 * 4, "gradients"},  // numel * sizeof(float)
        {"all_reduce", {1}, 1 * 4, "loss"},
        {"broadcast", {7}, 7 * 4, "weights"},
        {"gather", {3, 2}, 6 * 4, "gradients 2"},
        {"scatter", {3, 2}, 6 * 4, "gradients 2"},
        {"barrier", {}, 0, "end"},
    };
    for (size_t k = 0; k < records.size(); ++k) {
      SCOPED_TRACE("record " + std::to_string(k));
      EXPECT_EQ(records[k].op, expected[k].op);
      EXPECT_EQ(records[k].shape, expected[k].shape);
      EXPECT_EQ(records[k].bytes, expected[k].bytes);
      EXPECT_EQ(records[k].tag, expected[k].tag);
      EXPECT_GE(records[k].seconds, 0.0);
      if (records[k].op != "barrier") {
        EXPECT_EQ(records[k].dtype, "float32");  // group.h: "float32", ...
      }
    }

    // Totals by op and tag prefix.
    EXPECT_EQ(g.log().bytes("all_reduce"), 21 * 4);
    EXPECT_EQ(g.log().bytes("", "gradients"), (20 + 6 + 6) * 4);
    EXPECT_EQ(g.log().bytes("gather", "gradients"), 6 * 4);
    EXPECT_EQ(g.log().bytes(), (20 + 1 + 7 + 6 + 6) * 4);
    EXPECT_GE(g.log().seconds("all_reduce"), 0.0);
    g.log().clear();
    EXPECT_TRUE(g.log().records().empty());
    EXPECT_EQ(g.log().bytes(), 0);
  });
}

TEST(CommLog, OperationsAreNumberedInTheOrderThisRankIssuedThem) {
  run_ranks(2, [&](Group& g) {
    torch::Tensor t = torch::ones({2});
    g.all_reduce(t);
    g.barrier();
    g.broadcast(t, 1);
    std::vector<int64_t> numbers;
    for (const auto& r : g.log().records()) numbers.push_back(r.sequence);
    EXPECT_EQ(numbers, (std::vector<int64_t>{1, 2, 3}));
  });
}

TEST(CommLog, DtypeAndBytesOfOtherTypes) {
  run_ranks(1, [&](Group& g) {
    torch::Tensor d = torch::zeros({3}, torch::kFloat64);
    g.all_reduce(d);
    torch::Tensor i = torch::zeros({5}, torch::kInt64);
    g.broadcast(i, 0);
    const auto records = g.log().records();
    ASSERT_EQ(records.size(), 2u);
    EXPECT_EQ(records[0].dtype, "float64");
    EXPECT_EQ(records[0].bytes, 3 * 8);
    EXPECT_EQ(records[1].dtype, "int64");
    EXPECT_EQ(records[1].bytes, 5 * 8);
  });
}

TEST(CommLog, AsyncAllReduceIsRecordedWhenWaited) {
  run_ranks(2, [&](Group& g) {
    torch::Tensor t = torch::ones({10});
    dtlab::dist::PendingWork w = g.all_reduce_async(t, "ddp bucket 0");
    w.wait();
    const auto records = g.log().records();
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].op, "all_reduce");
    EXPECT_EQ(records[0].bytes, 40);
    EXPECT_EQ(records[0].tag, "ddp bucket 0");
  });
}

TEST(RunRanks, ReportsTheRankThatFailed) {
  // The harness itself: a failure on one rank surfaces in the test's thread, naming the rank.
  try {
    run_ranks(2, [&](Group& g) {
      if (g.rank() == 1) throw dtlab::Error("boom");
    });
    ADD_FAILURE() << "expected run_ranks to throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 of 2 failed: boom"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// Desync detection (Note [Desync detection] in dist/group.h)

TEST(DesyncDetection, IsOffUnlessAsked) {
  run_ranks(1, [](Group& g) { EXPECT_FALSE(g.checks_collectives()); });
}

// The most common data-parallel bug: one rank skips the gradient all_reduce and meets the others
// at the next one. Every rank stops at once, and each says what every rank called.
TEST(DesyncDetection, RanksCallingDifferentCollectivesAllStopSayingWhatEachCalled) {
  std::vector<std::string> messages(2);
  run_ranks(2, [&](Group& g) {
    g.check_collectives(true);
    torch::Tensor agreed = torch::ones({3});
    g.broadcast(agreed, 0, "initial parameters");
    torch::Tensor t = g.rank() == 0 ? torch::ones({2}) : torch::ones({1});
    try {
      g.all_reduce(t, ReduceOp::SUM, g.rank() == 0 ? "gradients" : "loss");
      ADD_FAILURE() << "no desync detected";
    } catch (const dtlab::DesyncError& e) {
      messages[static_cast<size_t>(g.rank())] = e.what();
    }
  });
  const std::string lines = "rank 0: all_reduce #2 (gradients) float32 [2]; rank 1: all_reduce #2 (loss) float32 [1]";
  for (const std::string& m : messages) EXPECT_NE(m.find(lines), std::string::npos) << m;
}

TEST(DesyncDetection, AgreeingRanksRunAsBeforeAndTheCheckIsNeitherLoggedNorNumbered) {
  run_ranks(2, [](Group& g) {
    g.check_collectives(true);
    torch::Tensor t = torch::full({4}, static_cast<float>(g.rank() + 1));
    g.all_reduce(t, ReduceOp::SUM, "gradients");
    EXPECT_TRUE(torch::equal(t, torch::full({4}, 3.0f)));
    // Point to point is not compared: a send meets a recv.
    torch::Tensor p = torch::full({2}, 7.0f);
    if (g.rank() == 0) g.send(p, 1, "activations"); else g.recv(p, 0, "activations");
    g.barrier("done");
    const auto records = g.log().records();
    ASSERT_EQ(records.size(), 3u);
    EXPECT_EQ(records[2].sequence, 3);
  });
}

// dist/subgroup.h: a 2 x 2 grid as a pipeline that is data parallel makes it. The sub-groups'
// collectives reduce over their members only, and the world's still over everyone.
TEST(NewGroup, EachSubGroupReducesOverItsMembersOnly) {
  run_ranks(4, [](Group& world) {
    const int stage = world.rank() % 2;
    const std::vector<int> members = {stage, stage + 2};
    auto sub = dtlab::dist::new_group(world, members, "stage " + std::to_string(stage));
    EXPECT_EQ(sub->size(), 2);
    EXPECT_EQ(sub->rank(), world.rank() / 2);
    // Its errors name the rank as the launcher numbered it, and its place in the sub-group.
    EXPECT_EQ(dtlab::dist::rank_name(sub->state()),
              fmt::format("rank {} (rank {} of stage {})", world.rank(), world.rank() / 2, stage));
    torch::Tensor t = torch::full({3}, static_cast<float>(world.rank() + 1));
    sub->all_reduce(t, ReduceOp::SUM, "stage gradients");
    EXPECT_FLOAT_EQ(t[0].item<float>(), static_cast<float>(members[0] + 1 + members[1] + 1));
    torch::Tensor all = torch::ones({1});
    world.all_reduce(all);
    EXPECT_FLOAT_EQ(all.item<float>(), 4.0f);
  });
}

TEST(NewGroup, AListWithoutTheCallerOrWithARepeatIsAnError) {
  run_ranks(2, [](Group& world) {
    const int other = 1 - world.rank();
    EXPECT_THROW(dtlab::dist::new_group(world, {other}, "others"), dtlab::Error);
    EXPECT_THROW(dtlab::dist::new_group(world, {world.rank(), world.rank()}, "twice"), dtlab::Error);
    EXPECT_THROW(dtlab::dist::new_group(world, {world.rank(), 7}, "out of the world"), dtlab::Error);
  });
}

}  // namespace collectives_test
