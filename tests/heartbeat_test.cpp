// The heartbeat of Note [Who stopped] (dist/detail/heartbeat.h) against stores that misbehave:
// a write that fails once must not end the beats (the survivors would name a live rank as
// stopped), and a write that hangs must not hang the destructor. In one process, on c10d's
// in-memory HashStore.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "dtlab/dist/detail/heartbeat.h"

// One namespace for the whole file: unit suites are compiled in groups (Note [Unity builds]).
namespace heartbeat_test {

using Clock = std::chrono::steady_clock;
using dtlab::dist::detail::Heartbeat;

// The key and the first line of a beat, as heartbeat.cpp writes them ("count\nunix_ms\n...").
std::string beat_key(int rank) { return "dtlab/beat/" + std::to_string(rank); }

int64_t beat_count(c10d::Store& store, int rank) {
  if (!store.check({beat_key(rank)})) return 0;
  const std::vector<uint8_t> bytes = store.get(beat_key(rank));
  const std::string text(bytes.begin(), bytes.end());
  return std::stoll(text.substr(0, text.find('\n')));
}

// Waits (at most `limit`) until rank's beat count reaches `count`; returns the count then.
int64_t wait_for_count(c10d::Store& store, int rank, int64_t count, std::chrono::milliseconds limit) {
  const Clock::time_point end = Clock::now() + limit;
  int64_t seen = beat_count(store, rank);
  while (seen < count && Clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    seen = beat_count(store, rank);
  }
  return seen;
}

// Fails writes 2 .. failures + 1 of one key (the first, the constructor's beat, succeeds), as a
// store connection that drops a request or two does.
class FlakyStore : public c10d::HashStore {
 public:
  FlakyStore(std::string key, int failures) : key_(std::move(key)), failures_(failures) {}
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    if (key == key_ && writes_++ > 0 && failures_.load() > 0) {
      --failures_;
      throw std::runtime_error("FlakyStore: this write fails");
    }
    HashStore::set(key, value);
  }
  int failures_left() const { return failures_.load(); }

 private:
  std::string key_;
  std::atomic<int> writes_{0};
  std::atomic<int> failures_;
};

TEST(Heartbeat, BeatsOnAfterAStoreWriteFailsAndTheSurvivorsSeeItRunning) {
  auto flaky = c10::make_intrusive<FlakyStore>(beat_key(1), 2);
  flaky->set(beat_key(0), {'1', '\n', '0', '\n', '0', '\n'});  // rank 0's own beat, which who_stopped asks for
  Heartbeat h(c10::intrusive_ptr<c10d::Store>(flaky), 1, std::chrono::milliseconds(20));
  EXPECT_EQ(wait_for_count(*flaky, 1, 5, std::chrono::milliseconds(5000)), 5)
      << "the beats stopped after a failed write (" << 2 - flaky->failures_left() << " of 2 failed)";
  EXPECT_EQ(flaky->failures_left(), 0);
  // What rank 0 appends to an operation that failed: rank 1 is alive, not "stopped".
  const std::string sentence = dtlab::dist::detail::who_stopped(*flaky, 0, 2);
  EXPECT_NE(sentence.find("The other ranks are still running"), std::string::npos) << sentence;
  EXPECT_EQ(sentence.find("stopped:"), std::string::npos) << sentence;
}

// Blocks every write of one key after the first until released (at most 30 s: a broken test must
// not hang for ever), as a store whose server was stopped (SIGSTOP) does until its timeout.
class HangingStore : public c10d::HashStore {
 public:
  explicit HangingStore(std::string key) : key_(std::move(key)) {}
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    if (key == key_ && writes_++ > 0) {
      std::unique_lock<std::mutex> lock(mutex_);
      ++blocked_;
      changed_.notify_all();
      changed_.wait_for(lock, std::chrono::seconds(30), [this] { return released_; });
      --blocked_;
      changed_.notify_all();
      return;
    }
    HashStore::set(key, value);
  }
  bool wait_blocked(int want, std::chrono::seconds limit) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, limit, [&] { return blocked_ == want; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }

 private:
  std::string key_;
  std::atomic<int> writes_{0};
  std::mutex mutex_;
  std::condition_variable changed_;
  int blocked_ = 0;
  bool released_ = false;
};

TEST(Heartbeat, DestructionIsBoundedWhileAStoreWriteHangs) {
  auto store = c10::make_intrusive<HangingStore>(beat_key(2));
  Clock::time_point start;
  {
    Heartbeat h(c10::intrusive_ptr<c10d::Store>(store), 2, std::chrono::milliseconds(10));
    ASSERT_TRUE(store->wait_blocked(1, std::chrono::seconds(5))) << "the beat thread never wrote again";
    start = Clock::now();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_LT(seconds, std::chrono::duration<double>(dtlab::dist::detail::kStoreAnswer).count() + 1.0);
  EXPECT_GE(seconds, std::chrono::duration<double>(dtlab::dist::detail::kStoreAnswer).count() - 0.1)
      << "the destructor gave up before the bound: a store that answers late would lose its last beat's thread";
  // The beat thread, left behind, ends once its write returns; it owns what it uses.
  store->release();
  EXPECT_TRUE(store->wait_blocked(0, std::chrono::seconds(5)));
}

// What every rank of a run said when its operation timed out, before issue 39: true only when one
// rank is behind, and it pointed at --distributed_debug, which does not look at sends and receives.
constexpr const char* kOldSentence = "one of them waits at a different operation (--distributed_debug compares them)";

// Two live ranks on one store, each where the test puts it, beating every 20 ms as a rank does.
struct TwoRanks {
  c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::HashStore>();
  Heartbeat rank0{store, 0, std::chrono::milliseconds(20)};
  Heartbeat rank1{store, 1, std::chrono::milliseconds(20)};
};

TEST(Heartbeat, RanksThatAllWaitInSendsAndReceivesAreNamedAsADeadlock) {
  TwoRanks ranks;
  ranks.rank0.at_operation("send #3 (activation 1)");  // both send first: blocking sends never pair
  ranks.rank1.at_operation("send #4 (gradient 0)");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string sentence = dtlab::dist::detail::who_stopped(*ranks.store, 0, 2);
  EXPECT_NE(sentence.find("Every rank timed out together"), std::string::npos) << sentence;
  EXPECT_NE(sentence.find("this rank in send #3 (activation 1)"), std::string::npos) << sentence;
  EXPECT_NE(sentence.find("rank 1 in send #4 (gradient 0)"), std::string::npos) << sentence;
  EXPECT_NE(sentence.find("no rank can go on: a deadlock"), std::string::npos) << sentence;
  EXPECT_NE(sentence.find("send_async/recv_async"), std::string::npos) << sentence;
  EXPECT_NE(sentence.find("--distributed_debug compares collectives only, not sends and receives"), std::string::npos)
      << sentence;
  EXPECT_EQ(sentence.find("still running"), std::string::npos) << sentence;
  EXPECT_EQ(sentence.find(kOldSentence), std::string::npos) << sentence;
}

TEST(Heartbeat, RanksThatAllWaitInCollectivesAreADeadlockThatDistributedDebugNames) {
  TwoRanks ranks;
  ranks.rank0.at_operation("all_reduce #41 (gradients)");
  ranks.rank1.at_operation("all_reduce #41 (loss)");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string sentence = dtlab::dist::detail::who_stopped(*ranks.store, 1, 2);
  EXPECT_NE(sentence.find("no rank can go on: a deadlock"), std::string::npos) << sentence;
  EXPECT_NE(sentence.find("--distributed_debug names the first that differs"), std::string::npos) << sentence;
  EXPECT_EQ(sentence.find("send_async"), std::string::npos) << sentence;
}

TEST(Heartbeat, ARankBehindInItsOwnCodeIsNamedNotADeadlock) {
  TwoRanks ranks;
  ranks.rank0.at_operation("all_reduce #41 (gradients)");
  ranks.rank1.at_operation("all_reduce #40 (gradients)");
  ranks.rank1.operation_done();  // rank 1 finished #40 and is computing (or looping)
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string sentence = dtlab::dist::detail::who_stopped(*ranks.store, 0, 2);
  EXPECT_NE(sentence.find("rank 1 is in code of its own (its last operation, all_reduce #40 (gradients)"),
            std::string::npos) << sentence;
  EXPECT_EQ(sentence.find("deadlock"), std::string::npos) << sentence;
  EXPECT_EQ(sentence.find(kOldSentence), std::string::npos) << sentence;
}

TEST(Heartbeat, ARankThatReachedTheOperationLateIsBehindNotDeadlocked) {
  TwoRanks ranks;
  ranks.rank0.at_operation("recv #5 (activation 2)");
  // Longer than the survivor's own second look (kStoppedAfter), so rank 1's wait stays under half of
  // rank 0's: a slow stage that got there just now.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  ranks.rank1.at_operation("send #5 (activation 2)");
  const std::string sentence = dtlab::dist::detail::who_stopped(*ranks.store, 0, 2);
  EXPECT_NE(sentence.find("rank 1 reached send #5 (activation 2) only"), std::string::npos) << sentence;
  EXPECT_EQ(sentence.find("deadlock"), std::string::npos) << sentence;
}

TEST(Heartbeat, TheBeatFileHoldsWhereTheRankIsInTheLaunchersLayout) {
  const std::string file = ::testing::TempDir() + "heartbeat_test_rank1.beat";
  std::remove(file.c_str());
  auto store = c10::make_intrusive<c10d::HashStore>();
  {
    Heartbeat h(store, 1, std::chrono::milliseconds(20), file);
    h.at_step(3);
    h.at_operation("recv #9 (activation 2)");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::ifstream in(file);
  std::string count, unix_ms, step, in_flight, started, operation;
  std::getline(in, count);
  std::getline(in, unix_ms);
  std::getline(in, step);
  std::getline(in, in_flight);
  std::getline(in, started);
  std::getline(in, operation);
  EXPECT_GT(std::stoll(count), 1);
  EXPECT_EQ(step, "3");
  EXPECT_EQ(in_flight, "1");
  EXPECT_LE(std::stoll(started), std::stoll(unix_ms));
  EXPECT_EQ(operation, "recv #9 (activation 2)");
}

}  // namespace heartbeat_test
