// init_process_group in its three jobs (see dist/group.h): reach the store, meet every other
// rank there, connect the backend. Each names what it observed when it fails.
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/version.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "dtlab/core/cuda_half.h"
#include "dtlab/core/device.h"
#include "dtlab/dist/detail/c10d.h"
#include "dtlab/dist/detail/heartbeat.h"
#include "dtlab/dist/detail/nccl_group_maker.h"
#include "dtlab/dist/group.h"
#include "dtlab/dist/netdev.h"

namespace dtlab::dist {
namespace {

constexpr int kGlooThreads = 2;  // Gloo's worker threads that run async collectives

std::string hostname() {
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  return name;
}

// The running kernel's boot id: equal for every process of one machine, network namespaces
// included, and different on another machine. The host name where it cannot be read.
std::string machine_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (in && std::getline(in, id) && !id.empty()) return id;
  return "host " + hostname();
}

std::string who(const Settings& s) { return "rank " + std::to_string(s.rank); }
std::string master(const Settings& s) { return s.master_addr + ":" + std::to_string(s.master_port); }

// A TCPStore answers at once, but a port where another program listens accepts the connection
// and then never answers, and so does a stopped master. So each rank first sets a key and waits
// for it, a few seconds at most: a rendezvous answers in a millisecond; silence means the port is
// someone else's.
constexpr std::chrono::milliseconds kProbeLimit{5000};

std::string not_a_rendezvous(const Settings& s, std::chrono::milliseconds limit, const std::string& why) {
  return who(s) + ": " + master(s) + " accepted the connection but did not answer as a rendezvous within " +
         seconds_text(limit) + ": another program listens on that port (where rank 0 runs, it says the port is "
         "in use), or rank 0 is suspended (Ctrl-Z, a debugger). Pick another --master_port, or check "
         "--master_ip (" + why + ")";
}

// Note [Bounded store calls]: c10d's TCPStore client reads some answers with a recv that has no
// timeout: LibTorch 2.x pings the server in the constructor, and a wait that timed out sends a
// cancel and reads its answer (1.13 bounded both). A port where another program listens, or a
// stopped master, never answers, and the rank would hang. So each call that may meet such a
// server runs on a thread of its own, and the rank waits for it at most a bound: past it the call
// is left behind (it holds the store alive and is ended with the process, which is about to fail
// with the error that says why). A client rank also first waits, up to --timeout, until the
// master's port accepts connections (ranks may start before rank 0), so that the bound on its
// constructor covers only the answer.
struct NoAnswer : std::runtime_error {
  NoAnswer() : std::runtime_error("no answer") {}
};

template <typename F>
auto within(std::chrono::milliseconds limit, F call) -> decltype(call()) {
  using Result = decltype(call());
  auto task = std::make_shared<std::packaged_task<Result()>>(std::move(call));
  std::future<Result> result = task->get_future();
  std::thread([task] { (*task)(); }).detach();
  if (result.wait_for(limit) != std::future_status::ready) throw NoAnswer();
  return result.get();
}

// The store every rank meets in: a TCPStore that rank 0 serves (or torchrun's agent), under a
// prefix of this restart attempt so that keys of an earlier run never meet this one's.
c10::intrusive_ptr<c10d::Store> connect_store(const Settings& s) {
  c10::intrusive_ptr<c10d::Store> store;
  if (s.world_size == 1) {
    store = c10::make_intrusive<c10d::HashStore>();
  } else {
    const bool server = s.rank == 0 && !s.use_agent_store;
    if (!server && !accepts_connections(s.master_addr, s.master_port, s.timeout)) {
      throw DistError(who(s) + ": cannot reach the master at " + master(s) + " within " + seconds_text(s.timeout) +
                      ": is rank 0 running there, and are --master_ip and --master_port right? (nothing accepted "
                      "a connection)");
    }
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(s.master_port);
    options.isServer = server;
    options.waitWorkers = false;  // our own rendezvous names the ranks that are missing
    options.timeout = s.timeout;
    const std::string address = s.master_addr;
    try {
      const auto make = [address, options] { return c10::make_intrusive<c10d::TCPStore>(address, options); };
      store = server ? make() : within(std::min(s.timeout, kProbeLimit), make);
    } catch (const NoAnswer&) {
      throw DistError(not_a_rendezvous(s, std::min(s.timeout, kProbeLimit), "no answer to c10d's first query"));
    } catch (const std::exception& e) {
      const std::string why = what_of(e);
      if (server && why.find("in use") != std::string::npos) {
        throw DistError(who(s) + ": cannot serve the rendezvous on port " + std::to_string(s.master_port) +
                        ": the address is already in use: pick another --master_port");
      }
      if (server) throw DistError(who(s) + ": cannot serve the rendezvous at " + master(s) + ": " + why);
      throw DistError(not_a_rendezvous(s, std::min(s.timeout, kProbeLimit), why));
    }
  }
  store->setTimeout(s.timeout);
  return c10::make_intrusive<c10d::PrefixStore>("dtlab/attempt_" + std::to_string(s.restart_count), store);
}

void probe_store(const c10::intrusive_ptr<c10d::Store>& store, const Settings& s) {
  const std::string key = "dtlab/probe/" + std::to_string(s.rank);
  const std::chrono::milliseconds limit = std::min(s.timeout, kProbeLimit);
  try {
    within(limit + detail::kStoreAnswer, [store, key, limit] {
      store->set(key, std::vector<uint8_t>{1});
      store->wait({key}, limit);
      return true;
    });
  } catch (const std::exception& e) {
    throw DistError(not_a_rendezvous(s, limit, what_of(e)));
  }
}

// What a rendezvous that did not complete observed, in one sentence. Every query is bounded
// (Note [Who stopped]: a stopped master accepts connections and never answers): first whether the
// store still answers, then which ranks registered and with which world size.
std::string rendezvous_failure(const c10::intrusive_ptr<c10d::Store>& handle, const Settings& s,
                               const std::vector<std::string>& keys, std::chrono::steady_clock::time_point waited_from) {
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - waited_from).count();
  c10d::Store& store = *handle;
  try {
    // This rank's own key: a live store has it (Note [Bounded store calls]).
    const std::string own = keys[s.rank];
    within(detail::kStoreAnswer, [handle, own] {
      handle->wait({own}, detail::kStoreAnswer);
      return true;
    });
  } catch (const std::exception&) {
    return fmt::format("{}: rendezvous at {} failed after {:.1f} s: the master (rank 0) stopped answering while this "
                       "rank waited for the others. Rank 0 gives up when a rank has not arrived within --timeout "
                       "and its log names the missing rank(s) (did every rank start, with the same --world_size?); "
                       "otherwise it was killed or stopped", who(s), master(s), waited);
  }
  std::string missing, mismatched;
  for (int r = 0; r < s.world_size; ++r) {
    if (r == s.rank) continue;  // this rank did arrive
    if (!store.check({keys[r]})) {
      missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      continue;
    }
    const std::vector<uint8_t> v = store.get(keys[r]);
    const std::string text(v.begin(), v.end());
    const size_t first = text.find('\n'), second = text.find('\n', first + 1);
    const std::string their_world = text.substr(first + 1, second - first - 1);
    if (their_world != std::to_string(s.world_size)) {
      mismatched += fmt::format("; rank {} arrived with --world_size {}", r, their_world);
    }
  }
  return fmt::format("{}: rendezvous at {} timed out after {}: rank(s) {} of world size {} never arrived{} (did every "
                     "rank start, with the same --world_size?)", who(s), master(s), seconds_text(s.timeout),
                     missing.empty() ? "?" : missing, s.world_size, mismatched);
}

struct Locality {
  int local_rank = 0, local_world_size = 0;
  int ranks_on_this_machine = 0;
};

// Every rank registers its host, world size and machine, then waits for all the others. A host is
// a host name and the address that reaches the master: network namespaces on one machine share
// the host name but not the address. A machine is a running kernel (machine_id), which they
// share. Returns this rank's place among the ranks of its host, and the ranks of its machine.
Locality rendezvous(const c10::intrusive_ptr<c10d::Store>& handle, const Settings& s, const std::string& address) {
  c10d::Store& store = *handle;
  const std::string me = hostname() + "@" + address;
  const std::string machine = machine_id();
  const std::string value = me + "\n" + std::to_string(s.world_size) + "\n" + machine;
  store.set("dtlab/rank/" + std::to_string(s.rank), std::vector<uint8_t>(value.begin(), value.end()));
  std::vector<std::string> keys;
  for (int r = 0; r < s.world_size; ++r) keys.push_back("dtlab/rank/" + std::to_string(r));
  const auto waited_from = std::chrono::steady_clock::now();
  try {
    within(s.timeout + detail::kStoreAnswer, [handle, keys, timeout = s.timeout] {  // Note [Bounded store calls]
      handle->wait(keys, timeout);
      return true;
    });
  } catch (const std::exception&) {
    throw DistError(rendezvous_failure(handle, s, keys, waited_from));
  }
  Locality here;
  for (int r = 0; r < s.world_size; ++r) {
    const std::vector<uint8_t> v = store.get(keys[r]);
    const std::string text(v.begin(), v.end());
    const size_t first = text.find('\n'), second = text.find('\n', first + 1);
    const std::string host = text.substr(0, first);
    const int their_world = std::stoi(text.substr(first + 1, second - first - 1));
    const std::string their_machine = text.substr(second + 1);
    if (their_world != s.world_size) {
      throw DistError(who(s) + ": rank " + std::to_string(r) + " runs with --world_size " +
                      std::to_string(their_world) + ", this rank with " + std::to_string(s.world_size));
    }
    if (host == me) {
      if (r < s.rank) ++here.local_rank;
      ++here.local_world_size;
    }
    if (their_machine == machine) ++here.ranks_on_this_machine;
  }
  return here;
}

#ifdef USE_C10D_NCCL
// Note [NCCL's errors]: by default ProcessGroupNCCL's watchdog thread ends the whole process
// when a collective outlives its timeout (TORCH_NCCL_ASYNC_ERROR_HANDLING=3 in 2.x), with c10's
// message and no word of which operation or rank. With 0, a timed-out or failed operation is
// reported where the kit waits for it (Work::wait with the run's timeout), which turns it into
// a DistError naming this rank, the operation and the rank that stopped, as with Gloo. A value
// the user set is kept.
void report_nccl_errors_where_waited() {
  setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0", /*overwrite=*/0);
  setenv("NCCL_ASYNC_ERROR_HANDLING", "0", /*overwrite=*/0);  // its name before 2.2
}
#endif

// The c10d process group of the chosen backend, over the store. device: this rank's
// (Note [Devices]); NCCL's communicators bind to the current device.
c10::intrusive_ptr<C10dBackend> connect_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                const Settings& s, const std::string& address,
                                                const torch::Device& device) {
  try {
    if (s.backend == "nccl") {
#ifdef USE_C10D_NCCL
      // ProcessGroupNCCL lives in LibTorch's CUDA half, which only libdtlab_cuda_half.so links
      // (Note [The CUDA half where a GPU is], core/cuda_half.h).
      const auto make = reinterpret_cast<detail::MakeNcclGroup*>(cuda_half_symbol(detail::kMakeNcclGroupSymbol));
      if (!make) {
        throw DistError("--backend nccl: the CUDA half of this build is not loaded: " + cuda_half().why_not +
                        "; use --backend gloo");
      }
      report_nccl_errors_where_waited();
      use_device(device);
      c10::intrusive_ptr<C10dBackend> group;
      make(store, s.rank, s.world_size, s.timeout, group);
      return group;
#else
      throw DistError("--backend nccl: this LibTorch (" TORCH_VERSION ") was built without NCCL; "
                      "use --backend gloo, or build dtlab against a CUDA LibTorch (CMAKE_PREFIX_PATH)");
#endif
    }
    auto options = c10d::ProcessGroupGloo::Options::create(s.timeout);
    options->devices.push_back(s.interface ? c10d::ProcessGroupGloo::createDeviceForInterface(*s.interface)
                                           : c10d::ProcessGroupGloo::createDeviceForHostname(address));
    options->threads = kGlooThreads;
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, s.rank, s.world_size, options);
  } catch (const DistError&) {
    throw;
  } catch (const std::exception& e) {
    throw DistError(who(s) + ": cannot connect the " + s.backend + " process group (" +
                    (s.interface ? "interface " + *s.interface : "address " + address) + "): " + what_of(e));
  }
}

// Note [Who stopped] (dist/detail/heartbeat.h): this rank's heartbeat, on a store connection of
// its own. DTLAB_HEARTBEAT_SECONDS sets the interval; 0 turns it off (to measure what it costs).
std::unique_ptr<detail::Heartbeat> start_heartbeat(const Settings& s) {
  std::chrono::milliseconds interval = detail::kBeatInterval;
  if (const char* env = std::getenv("DTLAB_HEARTBEAT_SECONDS")) {
    try {
      interval = std::chrono::milliseconds(static_cast<int64_t>(std::stod(env) * 1000));
    } catch (const std::exception&) {
      throw Error(std::string("DTLAB_HEARTBEAT_SECONDS=") + env + ": not a number of seconds");
    }
    if (interval.count() <= 0) return nullptr;
  }
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(s.master_port);
  options.isServer = false;
  options.waitWorkers = false;
  options.timeout = s.timeout;
  try {
    auto store = c10::make_intrusive<c10d::TCPStore>(s.master_addr, options);
    std::string file = s.beat_file;
    if (const size_t at = file.find("{rank}"); at != std::string::npos) file.replace(at, 6, std::to_string(s.rank));
    return std::make_unique<detail::Heartbeat>(
        c10::make_intrusive<c10d::PrefixStore>("dtlab/attempt_" + std::to_string(s.restart_count), store), s.rank,
        interval, file);
  } catch (const std::exception& e) {
    throw DistError(who(s) + ": cannot open a second connection to the rendezvous at " + master(s) + ": " + what_of(e));
  }
}

}  // namespace

// Note [SIGPIPE on a rank]: Gloo writes to its peers with writev, which raises SIGPIPE when the
// peer has closed its end, and a C++ program dies of SIGPIPE unless it ignores it (Python, which
// ignores it at start-up, never sees this). So a rank still sending to a rank that has just
// stopped (with its own DistError, which names the cause) was killed by signal 13 with nothing
// said, depending on which of the two got there first. Ignored, the write fails with EPIPE, Gloo
// throws, and the kit names the operation and the peer (who_stopped) like any other failure.
// Nothing in the kit relies on SIGPIPE: its own writes are to files, stdout and the grader's pipes,
// where EPIPE is an error like any other. tests/faults_test.cpp holds it.
void ignore_sigpipe() { std::signal(SIGPIPE, SIG_IGN); }

std::unique_ptr<Group> init_process_group(const Settings& s) {
  ignore_sigpipe();  // Note [SIGPIPE on a rank]
  // The local address that routes to the master is the one the other ranks can reach.
  const std::string address =
      s.world_size == 1 ? "127.0.0.1" : local_address_towards(s.master_addr, s.master_port);
  const c10::intrusive_ptr<c10d::Store> store = connect_store(s);
  if (s.world_size > 1) probe_store(store, s);
  const Locality here = rendezvous(store, s, address);
  std::unique_ptr<detail::Heartbeat> heartbeat = s.world_size > 1 ? start_heartbeat(s) : nullptr;
  const int local_rank = s.local_rank.value_or(here.local_rank);
  const torch::Device device = rank_device(s.backend, s.rank, local_rank, cuda_availability());
  std::unique_ptr<Group> group =
      wrap_process_group(connect_backend(store, s, address, device), s.rank, s.world_size, s.timeout, s.backend,
                         local_rank, here.local_world_size, here.ranks_on_this_machine);
  group->state().device = device;
  // Sub-groups (dist/subgroup.h): the same backend and network device, over the same store.
  group->state().make_backend = [store, s, address, device](const std::string& prefix, int rank, int size) {
    Settings sub = s;
    sub.rank = rank;
    sub.world_size = size;
    return connect_backend(c10::make_intrusive<c10d::PrefixStore>(prefix, store), sub, address, device);
  };
  if (heartbeat) attach_heartbeat(*group, store, std::move(heartbeat));
  group->check_collectives(s.check_collectives);
  return group;
}

}  // namespace dtlab::dist
