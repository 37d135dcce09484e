// Which rank stopped: every rank's heartbeat in the rendezvous store, read by a survivor when one
// of its operations fails. Kit-internal (it speaks c10d's Store); dist/group.cpp uses it.
//
// Note [Who stopped]: when a rank is killed or stopped, the others learn it only from Gloo, which
// names a peer by an address and an ephemeral port ("Connection closed by peer
// [127.0.0.1]:43512"), or not at all (a stopped rank just never answers: the collective times
// out). So each rank runs a heartbeat thread that writes, every kBeatInterval, a counter, its
// wall-clock time and where it is (step, operation, whether it waits in it) to the store under
// beat/<rank>, at the start of every training step and at least every kBeatInterval, over a
// store connection of its own (a beat never waits behind the main thread's store calls). With
// --beat_file it writes the same beat to that file first (replaced whole, by a rename), where a
// launcher reads it without a store (the grader's, Note [A run that stalls] in grader/launch.cpp). A rank
// whose operation failed reads every beat, waits kStoppedAfter, and reads them again: a rank whose
// counter did not move has stopped (a live rank beats even while it waits in a collective,
// because the beat is its own thread). When the store itself does not answer, the rank that
// serves it, rank 0, is the one that stopped (or has already ended). Rank 0 waits, before it
// leaves, for the ranks still reading (keys diagnosing/<rank>, diagnosed/<rank>), so that its
// exit does not cut their diagnosis short. Every read is bounded: the diagnosis adds at most
// kStoppedAfter plus kStoreAnswer to the failure it explains (rank 0: twice that).
//
// A write that fails (a dropped connection, a store that refused one request) costs one beat,
// not the rest: the thread writes again at the next interval, so a live rank is never named as
// stopped because of one failure (a store that stays gone fails every write, and the survivors'
// reads of it fail too: they then name rank 0). The destructor waits at most kStoreAnswer for the
// thread: a write to a store that does not answer (its server stopped) can block until the
// store's own timeout, so the thread is then left to end on its own, holding what it uses.
// tests/heartbeat_test.cpp runs both on stores that fail or hang a write.
//
// What the survivor says: the ranks that stopped beating, by name. When every other rank still
// beats, the beats say where each is: when every rank waits in an operation it started before
// this rank's own timed out half-way, the ranks all wait for one another: "no rank can go on: a
// deadlock", with what each waits in (send/recv: the order of the sends and receives; collectives:
// different ones, which --distributed_debug names); otherwise the ranks that are behind are named,
// with whether they wait in an operation or run code of their own.
//
// Cost: one small store write per rank per step and every half second, on a thread of its own, and one
// string copy under a mutex per operation (measured in docs/DESIGN.md, under the process group).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace dtlab::dist::detail {

constexpr std::chrono::milliseconds kBeatInterval{500};
// Long enough that a live rank's beat thread has surely run again on a loaded machine, short
// enough that rank 0 (whose store the others read) is still there when they read again.
constexpr std::chrono::milliseconds kStoppedAfter{1200};
// A live store answers in a millisecond: this long without an answer means it is gone.
constexpr std::chrono::milliseconds kStoreAnswer{2000};

class Heartbeat {
 public:
  // Writes the first beat before returning (so every rank's key exists once the rendezvous is
  // over), then beats every `interval` on its own thread. beat_store: a connection of its own.
  // file: also written every beat ("": not).
  Heartbeat(c10::intrusive_ptr<c10d::Store> beat_store, int rank, std::chrono::milliseconds interval,
            std::string file = "");
  // Stops the thread and joins it: at once when it sleeps on its condition variable; when it is
  // inside a store write that does not return within kStoreAnswer, it is detached instead.
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Where this rank is: the training step (beats at once) and the operation it runs now, until
  // operation_done (its wait returned or failed). Any thread.
  void at_step(int64_t step);
  void at_operation(std::string operation);
  void operation_done();

 private:
  // What the beat thread uses, owned jointly by the thread and this object, so that a thread the
  // destructor had to leave behind never touches a destroyed Heartbeat.
  struct State {
    c10::intrusive_ptr<c10d::Store> store;
    std::string key;
    std::string file;
    std::chrono::milliseconds interval;
    std::atomic<int64_t> step{0};
    int64_t count = 0;  // the beat thread's only (and the constructor's, before it starts)
    std::mutex mutex;   // guards operation, operation_unix_ms, in_flight, due, stop and ended
    std::string operation = "the rendezvous";
    int64_t operation_unix_ms = 0;
    int64_t in_flight = 0;  // operations started and not yet waited for
    bool due = false;   // at_step asks for a beat now
    bool stop = false;
    bool ended = false;  // the thread has left its loop
    std::condition_variable wake, end;
  };
  static void beat(State& s);
  static void run(const std::shared_ptr<State>& s);

  std::shared_ptr<State> state_;
  std::thread thread_;
};

// Note [Who stopped]: " Rank 2 stopped: last heard from 1.3 s ago, in step 12; its last operation
// then: all_reduce #41 (gradients) (...)." or " Every rank is waiting ...: no rank can go on: a
// deadlock. ..." — the sentence a failed operation of rank `rank` appends to its error, or ""
// when it cannot tell. Never throws; takes at most kStoreAnswer + kStoppedAfter.
std::string who_stopped(c10d::Store& store, int rank, int world);

}  // namespace dtlab::dist::detail
