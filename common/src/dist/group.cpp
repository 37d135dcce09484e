// Collectives with timeouts and records, and the rendezvous, see dist/group.h.
#include "dtlab/dist/group.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "dtlab/dist/netdev.h"

namespace dtlab::dist {
namespace {

constexpr int kGlooThreads = 2;  // Gloo's worker threads that run async collectives

std::string first_line(const std::string& s) {
  const size_t nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

std::string what_of(const std::exception& e) {
  if (auto* c10 = dynamic_cast<const c10::Error*>(&e)) return first_line(c10->what_without_backtrace());
  return first_line(e.what());
}

// PyTorch's spelling of dtypes ("float32"), not c10's ("Float").
std::string dtype_name(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::Double: return "float64";
    case c10::ScalarType::Half: return "float16";
    case c10::ScalarType::BFloat16: return "bfloat16";
    case c10::ScalarType::Long: return "int64";
    case c10::ScalarType::Int: return "int32";
    case c10::ScalarType::Short: return "int16";
    case c10::ScalarType::Char: return "int8";
    case c10::ScalarType::Byte: return "uint8";
    case c10::ScalarType::Bool: return "bool";
    default: return std::string(c10::toString(type));
  }
}

CommRecord describe(const std::string& op, const torch::Tensor& t, const std::string& tag) {
  CommRecord r;
  r.op = op;
  r.tag = tag;
  if (t.defined()) {
    r.shape = t.sizes().vec();
    r.dtype = dtype_name(t.scalar_type());
    r.bytes = static_cast<int64_t>(t.numel() * t.element_size());
  }
  return r;
}

void require_contiguous(const torch::Tensor& t, const std::string& op) {
  if (!t.defined()) throw Error(op + ": the tensor is undefined (a parameter without a gradient?)");
  if (!t.is_contiguous()) throw Error(op + ": the tensor must be contiguous (call .contiguous())");
}

std::string hostname() {
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  return name;
}

std::string seconds_text(std::chrono::milliseconds ms) {
  std::ostringstream out;
  out << ms.count() / 1000.0 << " s";
  return out.str();
}

}  // namespace

void CommLog::add(CommRecord r) {
  std::lock_guard<std::mutex> lock(mutex_);
  records_.push_back(std::move(r));
}

std::vector<CommRecord> CommLog::records() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return records_;
}

void CommLog::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  records_.clear();
}

int64_t CommLog::bytes(const std::string& op, const std::string& tag_prefix) const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t total = 0;
  for (const auto& r : records_) {
    if ((op.empty() || r.op == op) && r.tag.rfind(tag_prefix, 0) == 0) total += r.bytes;
  }
  return total;
}

double CommLog::seconds(const std::string& op, const std::string& tag_prefix) const {
  std::lock_guard<std::mutex> lock(mutex_);
  double total = 0;
  for (const auto& r : records_) {
    if ((op.empty() || r.op == op) && r.tag.rfind(tag_prefix, 0) == 0) total += r.seconds;
  }
  return total;
}

void PendingWork::wait() {
  if (!work_) throw Error("PendingWork::wait on an empty work item");
  group_->finish(work_, record_, start_);
  work_.reset();
}

Group::Group(c10::intrusive_ptr<c10d::ProcessGroup> pg, int rank, int size,
             std::chrono::milliseconds timeout, std::string backend)
    : pg_(std::move(pg)), rank_(rank), size_(size), timeout_(timeout), backend_(std::move(backend)) {}

Group::~Group() = default;

void Group::finish(c10::intrusive_ptr<c10d::Work>& work, CommRecord& record,
                   std::chrono::steady_clock::time_point start) {
  try {
    if (!work->wait(timeout_)) throw std::runtime_error("timed out after " + seconds_text(timeout_));
  } catch (const std::exception& e) {
    throw DistError("rank " + std::to_string(rank_) + ": " + record.op +
                    (record.tag.empty() ? "" : " (" + record.tag + ")") + " failed: " + what_of(e) +
                    ". Another rank has probably stopped (crashed, killed, or waiting elsewhere): "
                    "its log says why");
  }
  record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log_.add(record);
}

void Group::all_reduce(torch::Tensor& tensor, ReduceOp op, const std::string& tag) {
  if (op == ReduceOp::SUM || op == ReduceOp::AVG_BY_DIVISION) {
    PendingWork w = all_reduce_async(tensor, tag);
    w.wait();
    if (op == ReduceOp::AVG_BY_DIVISION) tensor.div_(size_);
    return;
  }
  require_contiguous(tensor, "all_reduce");
  const auto start = std::chrono::steady_clock::now();
  CommRecord record = describe("all_reduce", tensor, tag);
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = op == ReduceOp::MAX ? c10d::ReduceOp::MAX : c10d::ReduceOp::MIN;
  options.timeout = timeout_;
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = pg_->allreduce(tensors, options);
  } catch (const std::exception& e) {
    throw DistError("rank " + std::to_string(rank_) + ": all_reduce failed: " + what_of(e));
  }
  finish(work, record, start);
}

PendingWork Group::all_reduce_async(torch::Tensor& tensor, const std::string& tag) {
  require_contiguous(tensor, "all_reduce");
  PendingWork w;
  w.group_ = this;
  w.record_ = describe("all_reduce", tensor, tag);
  w.start_ = std::chrono::steady_clock::now();
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  options.timeout = timeout_;
  try {
    w.work_ = pg_->allreduce(tensors, options);
  } catch (const std::exception& e) {
    throw DistError("rank " + std::to_string(rank_) + ": all_reduce failed: " + what_of(e));
  }
  ++sequence_;
  return w;
}

void Group::gather(const torch::Tensor& tensor, std::vector<torch::Tensor>* gather_list, int dst,
                   const std::string& tag) {
  require_contiguous(tensor, "gather");
  if (dst < 0 || dst >= size_) throw Error("gather: destination rank " + std::to_string(dst) + " does not exist");
  if ((rank_ == dst) != (gather_list != nullptr)) {
    throw Error("gather: give a gather_list on the destination rank only (rank " +
                std::to_string(rank_) + ", destination " + std::to_string(dst) + ")");
  }
  const auto start = std::chrono::steady_clock::now();
  CommRecord record = describe("gather", tensor, tag);
  std::vector<std::vector<at::Tensor>> outputs;
  if (gather_list) {
    gather_list->clear();
    for (int r = 0; r < size_; ++r) gather_list->push_back(torch::empty_like(tensor));
    outputs.push_back(*gather_list);
  }
  std::vector<at::Tensor> inputs{tensor};
  c10d::GatherOptions options;
  options.rootRank = dst;
  options.timeout = timeout_;
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = pg_->gather(outputs, inputs, options);
  } catch (const std::exception& e) {
    throw DistError("rank " + std::to_string(rank_) + ": gather failed: " + what_of(e));
  }
  ++sequence_;
  finish(work, record, start);
}

void Group::scatter(torch::Tensor& tensor, const std::vector<torch::Tensor>* scatter_list, int src,
                    const std::string& tag) {
  require_contiguous(tensor, "scatter");
  if (src < 0 || src >= size_) throw Error("scatter: source rank " + std::to_string(src) + " does not exist");
  if ((rank_ == src) != (scatter_list != nullptr)) {
    throw Error("scatter: give a scatter_list on the source rank only (rank " +
                std::to_string(rank_) + ", source " + std::to_string(src) + ")");
  }
  if (scatter_list && static_cast<int>(scatter_list->size()) != size_) {
    throw Error("scatter: scatter_list has " + std::to_string(scatter_list->size()) +
                " tensors, one per rank (" + std::to_string(size_) + ") is needed");
  }
  const auto start = std::chrono::steady_clock::now();
  CommRecord record = describe("scatter", tensor, tag);
  std::vector<at::Tensor> outputs{tensor};
  std::vector<std::vector<at::Tensor>> inputs;
  if (scatter_list) {
    std::vector<at::Tensor> list;
    for (const auto& t : *scatter_list) list.push_back(t.contiguous());
    inputs.push_back(list);
  }
  c10d::ScatterOptions options;
  options.rootRank = src;
  options.timeout = timeout_;
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = pg_->scatter(outputs, inputs, options);
  } catch (const std::exception& e) {
    throw DistError("rank " + std::to_string(rank_) + ": scatter failed: " + what_of(e));
  }
  ++sequence_;
  finish(work, record, start);
}

void Group::broadcast(torch::Tensor& tensor, int src, const std::string& tag) {
  require_contiguous(tensor, "broadcast");
  const auto start = std::chrono::steady_clock::now();
  CommRecord record = describe("broadcast", tensor, tag);
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = src;
  options.timeout = timeout_;
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = pg_->broadcast(tensors, options);
  } catch (const std::exception& e) {
    throw DistError("rank " + std::to_string(rank_) + ": broadcast failed: " + what_of(e));
  }
  ++sequence_;
  finish(work, record, start);
}

void Group::barrier(const std::string& tag) {
  const auto start = std::chrono::steady_clock::now();
  CommRecord record = describe("barrier", torch::Tensor(), tag);
  c10d::BarrierOptions options;
  options.timeout = timeout_;
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = pg_->barrier(options);
  } catch (const std::exception& e) {
    throw DistError("rank " + std::to_string(rank_) + ": barrier failed: " + what_of(e));
  }
  ++sequence_;
  finish(work, record, start);
}

std::unique_ptr<Group> init_process_group(const Settings& s) {
  const std::string who = "rank " + std::to_string(s.rank);
  const std::string master = s.master_addr + ":" + std::to_string(s.master_port);
  c10::intrusive_ptr<c10d::Store> store;
  std::string address = "127.0.0.1";
  if (s.world_size == 1) {
    store = c10::make_intrusive<c10d::HashStore>();
  } else {
    // The local address that routes to the master is the one the other ranks can reach.
    address = local_address_towards(s.master_addr, s.master_port);
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(s.master_port);
    options.isServer = s.rank == 0 && !s.use_agent_store;
    options.waitWorkers = false;  // our own rendezvous below names the ranks that are missing
    options.timeout = s.timeout;
    try {
      store = c10::make_intrusive<c10d::TCPStore>(s.master_addr, options);
    } catch (const std::exception& e) {
      const std::string why = what_of(e);
      if (s.rank == 0 && why.find("in use") != std::string::npos) {
        throw DistError(who + ": cannot serve the rendezvous on port " + std::to_string(s.master_port) +
                        ": the address is already in use: pick another --master_port");
      }
      if (s.rank == 0) throw DistError(who + ": cannot serve the rendezvous at " + master + ": " + why);
      throw DistError(who + ": cannot reach the master at " + master + " within " +
                      seconds_text(s.timeout) + ": is rank 0 running there, and are --master_ip and "
                      "--master_port right? (" + why + ")");
    }
  }
  store->setTimeout(s.timeout);
  // Keys of this run (and of this torchrun restart) never meet those of an earlier one.
  store = c10::make_intrusive<c10d::PrefixStore>("dtlab/attempt_" + std::to_string(s.restart_count), store);

  // Rendezvous: every rank registers its host and world size, then waits for all the others.
  // A host is a host name and the address that reaches the master: network namespaces on one
  // machine share the host name but not the address.
  const std::string me = hostname() + "@" + address;
  store->set("dtlab/rank/" + std::to_string(s.rank),
             [&] { std::string v = me + "\n" + std::to_string(s.world_size); return std::vector<uint8_t>(v.begin(), v.end()); }());
  std::vector<std::string> keys;
  for (int r = 0; r < s.world_size; ++r) keys.push_back("dtlab/rank/" + std::to_string(r));
  try {
    store->wait(keys, s.timeout);
  } catch (const std::exception&) {
    std::string missing;
    bool store_lost = false;
    for (int r = 0; r < s.world_size && !store_lost; ++r) {
      if (r == s.rank) continue;  // this rank did arrive
      try {
        if (!store->check({keys[r]})) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      } catch (const std::exception&) {
        store_lost = true;
      }
    }
    if (store_lost) {
      throw DistError(who + ": rendezvous at " + master + " failed: the master (rank 0) stopped "
                      "while this rank waited for the others; rank 0's log names the missing rank(s) "
                      "(did every rank start, with the same --world_size?)");
    }
    throw DistError(who + ": rendezvous at " + master + " timed out after " + seconds_text(s.timeout) +
                    ": rank(s) " + (missing.empty() ? "?" : missing) + " of world size " +
                    std::to_string(s.world_size) + " never arrived (did every rank start, with the "
                    "same --world_size?)");
  }
  int local_rank = 0, local_world = 0;
  for (int r = 0; r < s.world_size; ++r) {
    const std::vector<uint8_t> v = store->get(keys[r]);
    const std::string text(v.begin(), v.end());
    const std::string host = text.substr(0, text.find('\n'));
    const int their_world = std::stoi(text.substr(text.find('\n') + 1));
    if (their_world != s.world_size) {
      throw DistError(who + ": rank " + std::to_string(r) + " runs with --world_size " +
                      std::to_string(their_world) + ", this rank with " + std::to_string(s.world_size));
    }
    if (host == me) {
      if (r < s.rank) ++local_rank;
      ++local_world;
    }
  }

  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  try {
    if (s.backend == "nccl") {
#ifdef USE_C10D_NCCL
      pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, s.rank, s.world_size,
                                                       c10d::ProcessGroupNCCL::Options::create());
#else
      throw DistError("--backend nccl: this LibTorch (" TORCH_VERSION ") was built without NCCL; "
                      "use --backend gloo, or build dtlab against a CUDA LibTorch (CMAKE_PREFIX_PATH)");
#endif
    } else {
      auto options = c10d::ProcessGroupGloo::Options::create(s.timeout);
      options->devices.push_back(
          s.interface ? c10d::ProcessGroupGloo::createDeviceForInterface(*s.interface)
                      : c10d::ProcessGroupGloo::createDeviceForHostname(address));
      options->threads = kGlooThreads;
      pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, s.rank, s.world_size, options);
    }
  } catch (const DistError&) {
    throw;
  } catch (const std::exception& e) {
    throw DistError(who + ": cannot connect the " + s.backend + " process group (" +
                    (s.interface ? "interface " + *s.interface : "address " + address) + "): " + what_of(e));
  }
  auto group = std::make_unique<Group>(pg, s.rank, s.world_size, s.timeout, s.backend);
  group->set_locality(s.local_rank.value_or(local_rank), local_world);
  return group;
}

}  // namespace dtlab::dist
