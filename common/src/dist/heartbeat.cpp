// Heartbeats in the rendezvous store, and the diagnosis that reads them: Note [Who stopped] in
// dist/detail/heartbeat.h.
#include "dtlab/dist/detail/heartbeat.h"

#include <fmt/format.h>

#include <optional>
#include <vector>

#include "dtlab/dist/detail/c10d.h"

namespace dtlab::dist::detail {
namespace heartbeat {

std::string beat_key(int rank) { return "dtlab/beat/" + std::to_string(rank); }

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A beat as stored: "count\nunix_ms\nstep\noperation".
struct Beat {
  int64_t count = 0, unix_ms = 0, step = 0;
  std::string operation;
};

std::string encode(const Beat& b) {
  return fmt::format("{}\n{}\n{}\n{}", b.count, b.unix_ms, b.step, b.operation);
}

std::optional<Beat> decode(const std::vector<uint8_t>& bytes) {
  const std::string text(bytes.begin(), bytes.end());
  Beat b;
  size_t at = 0;
  int64_t* fields[] = {&b.count, &b.unix_ms, &b.step};
  for (int64_t* field : fields) {
    const size_t end = text.find('\n', at);
    if (end == std::string::npos) return std::nullopt;
    try {
      *field = std::stoll(text.substr(at, end - at));
    } catch (const std::exception&) {
      return std::nullopt;
    }
    at = end + 1;
  }
  b.operation = text.substr(at);
  return b;
}

// Every other rank's beat; nullopt where a rank has none (it never got past the rendezvous).
std::vector<std::optional<Beat>> read_beats(c10d::Store& store, int rank, int world) {
  std::vector<std::optional<Beat>> beats(world);
  for (int r = 0; r < world; ++r) {
    if (r == rank || !store.check({beat_key(r)})) continue;
    beats[r] = decode(store.get(beat_key(r)));
  }
  return beats;
}

}  // namespace heartbeat

Heartbeat::Heartbeat(c10::intrusive_ptr<c10d::Store> beat_store, int rank, std::chrono::milliseconds interval)
    : state_(std::make_shared<State>()) {
  state_->store = std::move(beat_store);
  state_->key = heartbeat::beat_key(rank);
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
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->operation = std::move(operation);
}

void Heartbeat::beat(State& s) {
  heartbeat::Beat b;
  b.count = ++s.count;
  b.unix_ms = heartbeat::unix_ms();
  b.step = s.step.load(std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    b.operation = s.operation;
  }
  const std::string value = heartbeat::encode(b);
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

// The sentence for the ranks whose beats did not move between the two reads.
std::string describe_stopped(const std::vector<std::optional<Beat>>& before, const std::vector<std::optional<Beat>>& after,
                             int rank) {
  const int64_t now = unix_ms();
  std::string stopped;
  for (size_t r = 0; r < after.size(); ++r) {
    if (static_cast<int>(r) == rank || !after[r]) continue;
    const Beat& b = *after[r];
    if (before[r] && before[r]->count != b.count) continue;  // it beat: still running
    stopped += fmt::format("{}ank {} stopped: last heard from {:.1f} s ago, {}; its last operation then: {}",
                           stopped.empty() ? " R" : "; r", r, (now - b.unix_ms) / 1000.0,
                           b.step > 0 ? fmt::format("in step {}", b.step) : "before step 1", b.operation);
  }
  if (!stopped.empty()) return stopped + " (its log says why, or ends without a word if it was killed).";
  return " Every other rank is still running (their heartbeats go on): one of them waits at a different operation "
         "(--distributed_debug compares them) or is slower than --timeout.";
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
    const auto before = read_beats(store, rank, world);
    std::this_thread::sleep_for(kStoppedAfter);
    std::vector<std::optional<Beat>> after;
    try {
      after = read_beats(store, rank, world);
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
