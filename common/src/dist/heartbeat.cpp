// Heartbeats in the rendezvous store, and the diagnosis that reads them: Note [Who stopped] in
// dist/detail/heartbeat.h.
#include "dtlab/dist/detail/heartbeat.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <vector>

#include "dtlab/dist/beat.h"
#include "dtlab/dist/detail/c10d.h"

namespace dtlab::dist::detail {
namespace heartbeat {

std::string beat_key(int rank) { return "dtlab/beat/" + std::to_string(rank); }

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::optional<Beat> decode(const std::vector<uint8_t>& bytes) {
  return decode_beat(std::string(bytes.begin(), bytes.end()));
}

// Every rank's beat, this one's too; nullopt where a rank has none (it never got past the rendezvous).
std::vector<std::optional<Beat>> read_beats(c10d::Store& store, int world) {
  std::vector<std::optional<Beat>> beats(world);
  for (int r = 0; r < world; ++r) {
    if (!store.check({beat_key(r)})) continue;
    beats[r] = decode(store.get(beat_key(r)));
  }
  return beats;
}

}  // namespace heartbeat

Heartbeat::Heartbeat(c10::intrusive_ptr<c10d::Store> beat_store, int rank, std::chrono::milliseconds interval,
                     std::string file)
    : state_(std::make_shared<State>()) {
  state_->store = std::move(beat_store);
  state_->key = heartbeat::beat_key(rank);
  state_->file = std::move(file);
  state_->operation_unix_ms = heartbeat::unix_ms();
  state_->interval = interval;
  beat(*state_);  // the first beat's failure is the caller's: the rank cannot report where it is
  thread_ = std::thread([s = state_] { run(s); });
}

Heartbeat::~Heartbeat() {
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->stop = true;
  state_->wake.notify_all();
  // A thread inside a write to a store that does not answer may stay there until the store's
  // timeout (--timeout): wait as long as a live store takes to answer, then leave it.
  const bool ended = state_->end.wait_for(lock, kStoreAnswer, [this] { return state_->ended; });
  lock.unlock();
  if (ended) {
    thread_.join();
  } else {
    thread_.detach();  // it holds its own reference to the state and the store
  }
}

void Heartbeat::at_step(int64_t step) {
  state_->step.store(step, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->due = true;  // a beat at every step's start: the survivors then name the step it stopped in
  }
  state_->wake.notify_one();
}

void Heartbeat::at_operation(std::string operation) {
  const int64_t now = heartbeat::unix_ms();
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->operation = std::move(operation);
  state_->operation_unix_ms = now;
  ++state_->in_flight;
}

void Heartbeat::operation_done() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->in_flight > 0) --state_->in_flight;
}

void Heartbeat::beat(State& s) {
  Beat b;
  b.count = ++s.count;
  b.unix_ms = heartbeat::unix_ms();
  b.step = s.step.load(std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    b.operation = s.operation;
    b.operation_unix_ms = s.operation_unix_ms;
    b.in_flight = s.in_flight;
  }
  const std::string value = encode_beat(b);
  // The file first: a store that does not answer (rank 0 stopped) must not keep the launcher
  // from seeing where this rank is. Written whole under another name and renamed, so a reader
  // never sees half a beat; a failed write costs this beat only.
  if (!s.file.empty()) {
    const std::string temporary = s.file + ".new";
    if (std::FILE* f = std::fopen(temporary.c_str(), "wb")) {
      const bool written = std::fwrite(value.data(), 1, value.size(), f) == value.size();
      if (std::fclose(f) == 0 && written) std::rename(temporary.c_str(), s.file.c_str());
    }
  }
  s.store->set(s.key, std::vector<uint8_t>(value.begin(), value.end()));
}

void Heartbeat::run(const std::shared_ptr<State>& s) {
  std::unique_lock<std::mutex> lock(s->mutex);
  while (true) {
    s->wake.wait_for(lock, s->interval, [&] { return s->stop || s->due; });
    if (s->stop) break;
    s->due = false;
    lock.unlock();
    try {
      beat(*s);
    } catch (const std::exception&) {
      // One lost beat; the next interval writes again. The count still moved, so the survivors
      // see a change as soon as a write gets through.
    }
    lock.lock();
  }
  s->ended = true;
  s->end.notify_all();
}

namespace heartbeat {

bool point_to_point(const std::string& operation) {
  return operation.rfind("send ", 0) == 0 || operation.rfind("recv ", 0) == 0;
}

// The sentence for the ranks whose beats did not move between the two reads; when every other
// rank beats on, what their beats say: all waiting for one another (a deadlock), or some behind.
std::string describe_stopped(const std::vector<std::optional<Beat>>& before, const std::vector<std::optional<Beat>>& after,
                             int rank) {
  const int64_t now = unix_ms();
  auto seconds_since = [&](int64_t ms) { return std::max<int64_t>(0, now - ms) / 1000.0; };
  std::string stopped;
  for (size_t r = 0; r < after.size(); ++r) {
    if (static_cast<int>(r) == rank || !after[r]) continue;
    const Beat& b = *after[r];
    if (before[r] && before[r]->count != b.count) continue;  // it beat: still running
    stopped += fmt::format("{}ank {} stopped: last heard from {:.1f} s ago, {}; its last operation then: {}",
                           stopped.empty() ? " R" : "; r", r, seconds_since(b.unix_ms),
                           b.step > 0 ? fmt::format("in step {}", b.step) : "before step 1", b.operation);
  }
  if (!stopped.empty()) return stopped + " (its log says why, or ends without a word if it was killed).";

  // Every other rank beats. One that waits in an operation it started at least half as long ago as
  // this rank started its own waits with this one: they timed out together.
  const Beat* mine = rank < static_cast<int>(after.size()) && after[rank] ? &*after[rank] : nullptr;
  const double my_wait = mine ? seconds_since(mine->operation_unix_ms) : 0;
  bool all_waiting = mine != nullptr, any_point_to_point = mine && point_to_point(mine->operation);
  std::string waiting, behind;
  for (size_t r = 0; r < after.size(); ++r) {
    if (static_cast<int>(r) == rank || !after[r]) continue;
    const Beat& b = *after[r];
    const double waited = seconds_since(b.operation_unix_ms);
    if (b.in_flight > 0 && waited >= my_wait / 2) {
      waiting += fmt::format("; rank {} in {} (for {:.1f} s)", r, b.operation, waited);
      any_point_to_point |= point_to_point(b.operation);
      continue;
    }
    all_waiting = false;
    behind += fmt::format("{}rank {} {}", behind.empty() ? "" : "; ", r,
                          b.in_flight > 0 ? fmt::format("reached {} only {:.1f} s ago", b.operation, waited)
                                          : fmt::format("is in code of its own (its last operation, {}, started {:.1f} s "
                                                        "ago and completed)", b.operation, waited));
  }
  if (all_waiting && !waiting.empty()) {
    std::string out = fmt::format(" Every rank timed out together, each waiting for another: this rank in {} (for "
                                  "{:.1f} s){}: no rank can go on: a deadlock.", mine->operation, my_wait, waiting);
    if (any_point_to_point) {
      return out + " A blocking send waits until its peer receives and a blocking recv until its peer sends, so when "
                   "each rank's next send or recv needs another rank's to come first (two ranks that both send first, "
                   "schedules whose orders do not pair), none completes: pair them (one side receives first), or "
                   "start both with send_async/recv_async and then wait. --distributed_debug compares collectives "
                   "only, not sends and receives.";
    }
    return out + " The ranks wait in collectives that do not match (different ones, or different counts): "
                 "--distributed_debug names the first that differs.";
  }
  if (!behind.empty()) {
    return " The other ranks are still running (their heartbeats go on), but " + behind +
           ": a rank that is behind (slower than --timeout, or waiting for something that is not a kit operation) "
           "leaves the others waiting" +
           (mine && !point_to_point(mine->operation) ? " (if it then calls a different collective, "
                                                       "--distributed_debug names it)."
                                                     : ".");
  }
  return " Every other rank is still running (their heartbeats go on) but says nothing of where it is: one of them is "
         "slower than --timeout or waits elsewhere.";
}

std::string diagnosing_key(int rank) { return "dtlab/diagnosing/" + std::to_string(rank); }
std::string diagnosed_key(int rank) { return "dtlab/diagnosed/" + std::to_string(rank); }

// Rank 0 serves the store: before it leaves, the ranks still reading beats get to finish (they
// started at about the same time: a killed rank fails every survivor's operation at once, a
// stopped one times out the same collective on each).
void let_others_finish(c10d::Store& store, int world) {
  std::vector<std::string> pending;
  for (int r = 1; r < world; ++r) {
    if (store.check({diagnosing_key(r)}) && !store.check({diagnosed_key(r)})) pending.push_back(diagnosed_key(r));
  }
  if (pending.empty()) return;
  try {
    store.wait(pending, kStoppedAfter + kStoreAnswer);
  } catch (const std::exception&) {
    // bounded: one that is still reading then says that rank 0 ended
  }
}

}  // namespace heartbeat

std::string who_stopped(c10d::Store& store, int rank, int world) {
  using namespace heartbeat;
  try {
    // This rank's own beat exists: a store that cannot say so within kStoreAnswer is gone.
    const auto asked = std::chrono::steady_clock::now();
    try {
      store.wait({beat_key(rank)}, kStoreAnswer);
    } catch (const std::exception&) {
      if (rank == 0) return "";  // the store runs in this process: it cannot be the one that stopped
      if (std::chrono::steady_clock::now() - asked < kStoreAnswer / 2) {
        return " Rank 0 is gone: the rendezvous store it serves closed the connection (rank 0 was killed, or ended "
               "after a failure of its own: its log says which).";
      }
      return fmt::format(" Rank 0 stopped answering: the rendezvous store it serves has been silent for {} (rank 0 "
                         "is stopped, or its host is unreachable).", seconds_text(kStoreAnswer));
    }
    const std::vector<uint8_t> yes{1};
    store.set(diagnosing_key(rank), yes);
    const auto before = read_beats(store, world);
    std::this_thread::sleep_for(kStoppedAfter);
    std::vector<std::optional<Beat>> after;
    try {
      after = read_beats(store, world);
    } catch (const std::exception&) {
      return " Rank 0 ended while this rank looked for the rank that stopped: rank 0's log says what it saw.";
    }
    const std::string sentence = describe_stopped(before, after, rank);
    store.set(diagnosed_key(rank), yes);
    if (rank == 0) let_others_finish(store, world);
    return sentence;
  } catch (const std::exception&) {
    return "";  // the diagnosis must never hide the failure it explains
  }
}

}  // namespace dtlab::dist::detail
