// Collectives and point-to-point operations with timeouts and records, see dist/group.h. Every
// operation goes through start(): checks, record, launch, numbering and the typed error live
// there once; the public methods only say which c10d call to make.
#include "dtlab/dist/group.h"

#include <time.h>

#include <cstring>
#include <exception>
#include <sstream>
#include <thread>

#include "dtlab/dist/detail/c10d.h"

namespace dtlab::dist {
namespace detail {

struct InFlight {
  c10::intrusive_ptr<c10d::Work> work;
  Group::State* state = nullptr;
  CommRecord record;
  std::chrono::steady_clock::time_point start;
  double start_cpu = 0;             // the posting thread's CPU seconds then (CommRecord::before_wait)
  std::thread::id posted_by;
  std::string peer;  // " to rank 1", " from rank 0"; "" for a collective
};

}  // namespace detail

namespace {

// The calling thread's CPU seconds (CommRecord::before_wait).
double thread_cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

}  // namespace

std::string what_of(const std::exception& e) {
  std::string s = e.what();
  if (auto* c10 = dynamic_cast<const c10::Error*>(&e)) s = c10->what_without_backtrace();
  return s.substr(0, s.find('\n'));
}

std::string rank_name(const Group::State& s) {
  if (s.world_ranks.empty()) return "rank " + std::to_string(s.rank);
  return "rank " + std::to_string(s.world_ranks.at(static_cast<size_t>(s.rank))) + " (rank " + std::to_string(s.rank) +
         " of " + s.name + ")";
}

std::string seconds_text(std::chrono::milliseconds ms) {
  std::ostringstream out;
  out << ms.count() / 1000.0 << " s";
  return out.str();
}

namespace {

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

void require_rank(const Group::State& s, int peer, const std::string& op, const char* role) {
  if (peer < 0 || peer >= s.size) {
    throw Error(op + ": " + role + " rank " + std::to_string(peer) + " does not exist (world size " +
                std::to_string(s.size) + ")");
  }
}

// Note [CPU tensors on NCCL]: NCCL moves GPU memory only. The kit's own small exchanges (loss
// totals, evaluation counts, partition sizes, the desync check) make CPU tensors, so a blocking
// operation of an NCCL group carries a CPU tensor to this rank's GPU and its result back; an
// async one (DDP's buckets, a pipeline's send/recv) must be given tensors on the group's device
// already, since nothing would copy its result back. Gloo takes tensors where they are.
void require_on_backend(const Group::State& s, const torch::Tensor& t, const std::string& op) {
  if (t.defined() && !s.device.is_cpu() && t.device() != s.device) {
    throw Error(op + ": the tensor is on " + t.device().str() + ", but this rank's " + s.backend + " group works on " +
                s.device.str() + ": move it there first (.to(group.device()))");
  }
}

torch::Tensor to_backend(const Group::State& s, const torch::Tensor& t, const std::string& op) {
  if (t.defined() && t.device().is_cpu() && !s.device.is_cpu()) return t.to(s.device);
  require_on_backend(s, t, op);  // another GPU's tensor: not carried silently
  return t;
}

// The result of a staged operation back into the caller's tensor.
void from_backend(torch::Tensor& original, const torch::Tensor& staged) {
  if (!staged.is_same(original)) original.copy_(staged);
}

// "all_reduce #12 (gradients)": how this rank names an operation in its errors.
std::string name_of(const CommRecord& r) {
  return r.op + " #" + std::to_string(r.sequence) + (r.tag.empty() ? "" : " (" + r.tag + ")");
}

// "all_reduce #12 (gradients) float32 [2, 3]": what the desync check compares across ranks.
std::string fingerprint(const CommRecord& r) {
  std::string shape;
  for (size_t i = 0; i < r.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(r.shape[i]);
  return name_of(r) + " " + r.dtype + " [" + shape + "]";
}

// "Operation timed out!" stays as it is; "Connection closed by peer" gains a full stop.
std::string as_sentence(const std::string& text) {
  if (!text.empty() && std::strchr(".!?", text.back())) return text;
  return text + ".";
}

// Note [Who stopped] (dist/detail/heartbeat.h): the sentence that names the rank that stopped.
std::string who_stopped(const Group::State& s) {
  if (!s.store || !s.heartbeat) {
    return " Another rank has probably stopped (crashed, killed, or waiting elsewhere): its log says why.";
  }
  return detail::who_stopped(*s.store, s.rank, s.size);
}

// Note [Desync detection] (dist/group.h): an all_gather of every rank's fingerprint, as int64
// words of a fixed-size text, straight on the process group (not numbered, not logged). The
// number in the fingerprint counts collectives only (see start()).
void check_same_operation(Group::State& s, const CommRecord& record) {
  constexpr int64_t kWords = 24;  // 192 bytes of fingerprint; longer ones are cut
  const std::string mine = fingerprint(record);
  auto pack = [&] {
    torch::Tensor t = torch::zeros({kWords}, torch::kInt64);
    std::memcpy(t.data_ptr<int64_t>(), mine.data(), std::min<size_t>(mine.size(), kWords * 8 - 1));
    return t;
  };
  std::vector<at::Tensor> input{pack().to(s.device)};
  std::vector<std::vector<at::Tensor>> output(1);
  for (int r = 0; r < s.size; ++r) {
    output[0].push_back(torch::zeros({kWords}, torch::TensorOptions(torch::kInt64).device(s.device)));
  }
  try {
    c10d::AllgatherOptions options;
    options.timeout = s.timeout;
    const c10::intrusive_ptr<c10d::Work> work = s.pg->allgather(output, input, options);
    if (!work->wait(s.timeout)) throw std::runtime_error("timed out after " + seconds_text(s.timeout));
  } catch (const std::exception& e) {
    throw DistError(rank_name(s) + ": checking that every rank is about to run " +
                    name_of(record) + " failed: " + as_sentence(what_of(e)) + who_stopped(s));
  }
  std::vector<std::string> theirs;
  bool agree = true;
  for (const at::Tensor& gathered : output[0]) {
    const at::Tensor t = gathered.cpu();
    const char* bytes = reinterpret_cast<const char*>(t.data_ptr<int64_t>());
    theirs.emplace_back(bytes, strnlen(bytes, kWords * 8));
    agree &= theirs.back() == theirs.front();
  }
  if (agree) return;
  std::string lines;
  for (size_t r = 0; r < theirs.size(); ++r) {
    lines += (r ? "; " : "") + std::string("rank ") + std::to_string(r) + ": " + theirs[r];
  }
  throw DesyncError("the ranks called different collectives (every rank must issue the same collectives in the "
                    "same order): " + lines);
}

using Launch = std::function<c10::intrusive_ptr<c10d::Work>(C10dBackend&)>;

// The one path of every operation: number it, launch it, turn a launch failure into a
// DistError. The caller waits (blocking calls) or keeps the PendingWork (async ones).
// peer: " to rank 1" or " from rank 0" for send and recv, named if the work is dropped.
PendingWork start(Group::State& s, CommRecord record, const Launch& launch, std::string peer = "");

// Note [A dropped PendingWork]: a PendingWork destroyed (or overwritten) before wait() leaves its
// operation to chance: a dropped send_async (a common mistake: the result of the call is not
// kept) may never reach its peer, whose receive then times out after the group's timeout with
// nothing saying why. The kit names it instead. A destructor cannot throw, so the operation is
// written into the group's state, and this rank's next operation or wait() throws a DistError
// with it, at once: "rank 0: send #3 (activation 1) to rank 1 was never waited for: ...". The
// first such operation is named; the error stays, since the protocol is broken from there on. A
// work destroyed while an exception unwinds the stack is not named: the run is already stopping
// for a reason of its own. tests/collectives_test.cpp (DroppedPendingWork) and
// tests/pp_test.cpp (the dropped_send mutant) hold it.
void note_if_never_waited(const std::unique_ptr<detail::InFlight>& f) noexcept {
  if (!f || std::uncaught_exceptions() > 0) return;
  try {
    Group::State& s = *f->state;
    std::lock_guard<std::mutex> lock(s.dropped_mutex);
    if (!s.dropped.empty()) return;
    s.dropped = name_of(f->record) + f->peer + " was never waited for: keep the PendingWork that " +
                f->record.op + "_async returned and call wait() on it";
  } catch (...) {
    // Out of memory while composing a message: nothing better to do in a destructor.
  }
}

void throw_if_dropped(Group::State& s) {
  std::lock_guard<std::mutex> lock(s.dropped_mutex);
  if (!s.dropped.empty()) throw DistError(rank_name(s) + ": " + s.dropped);
}

}  // namespace

PendingWork::PendingWork() = default;
PendingWork::PendingWork(std::unique_ptr<detail::InFlight> in_flight) : in_flight_(std::move(in_flight)) {}
PendingWork::~PendingWork() { note_if_never_waited(in_flight_); }
PendingWork::PendingWork(PendingWork&&) noexcept = default;
PendingWork& PendingWork::operator=(PendingWork&& other) noexcept {
  if (this != &other) {
    note_if_never_waited(in_flight_);  // the work it held is dropped here
    in_flight_ = std::move(other.in_flight_);
  }
  return *this;
}
bool PendingWork::valid() const { return in_flight_ != nullptr; }

void PendingWork::wait() {
  if (!in_flight_) throw Error("PendingWork::wait on an empty work item");
  throw_if_dropped(*in_flight_->state);  // Note [A dropped PendingWork]
  std::unique_ptr<detail::InFlight> f = std::move(in_flight_);
  Group::State& s = *f->state;
  f->record.before_wait = std::this_thread::get_id() == f->posted_by ? thread_cpu_seconds() - f->start_cpu : -1;
  try {
    if (!f->work->wait(s.timeout)) throw std::runtime_error("timed out after " + seconds_text(s.timeout));
  } catch (const std::exception& e) {
    throw DistError(rank_name(s) + ": " + name_of(f->record) + " failed: " +
                    as_sentence(what_of(e)) + who_stopped(s));
  }
  // Only a wait that returned: a failed one leaves the rank "waiting" in its heartbeat while it and
  // the others diagnose the failure (Note [Who stopped]), which is where it is.
  if (s.heartbeat) s.heartbeat->operation_done();
  f->record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - f->start).count();
  s.log.add(f->record);
}

namespace {

PendingWork start(Group::State& s, CommRecord record, const Launch& launch, std::string peer) {
  throw_if_dropped(s);  // Note [A dropped PendingWork]
  record.sequence = ++s.sequence;
  if (s.heartbeat) s.heartbeat->at_operation(name_of(record));
  // Point-to-point pairs differ by design (a send meets a recv): only collectives are compared,
  // and they are numbered among themselves, since ranks that send and receive different numbers
  // of messages (a pipeline's stages) still issue the same collectives.
  if (record.op != "send" && record.op != "recv") {
    ++s.collectives;
    if (s.check_collectives && s.size > 1) {
      CommRecord numbered = record;
      numbered.sequence = s.collectives;
      check_same_operation(s, numbered);
    }
  }
  auto f = std::make_unique<detail::InFlight>();
  f->state = &s;
  f->start = std::chrono::steady_clock::now();
  f->start_cpu = thread_cpu_seconds();
  f->posted_by = std::this_thread::get_id();
  try {
    f->work = launch(*s.pg);
  } catch (const std::exception& e) {
    throw DistError(rank_name(s) + ": " + name_of(record) + " failed: " + what_of(e) + "." +
                    who_stopped(s));
  }
  f->record = std::move(record);
  f->peer = std::move(peer);
  return PendingWork(std::move(f));
}

c10d::ReduceOp c10d_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::MAX: return c10d::ReduceOp::MAX;
    case ReduceOp::MIN: return c10d::ReduceOp::MIN;
    default: return c10d::ReduceOp::SUM;  // AVG_BY_DIVISION divides afterwards
  }
}

}  // namespace

Group::Group(std::unique_ptr<State> state) : state_(std::move(state)) {}
Group::~Group() = default;

int Group::rank() const { return state_->rank; }
int Group::size() const { return state_->size; }
const std::string& Group::backend() const { return state_->backend; }
std::chrono::milliseconds Group::timeout() const { return state_->timeout; }
int Group::local_world_size() const { return state_->local_world_size; }
int Group::local_rank() const { return state_->local_rank; }
int Group::ranks_on_this_machine() const { return state_->ranks_on_this_machine; }
torch::Device Group::device() const { return state_->device; }
CommLog& Group::log() { return state_->log; }
void Group::note_step(int64_t step) {
  if (state_->heartbeat) state_->heartbeat->at_step(step);
}
void Group::check_collectives(bool on) { state_->check_collectives = on; }
bool Group::checks_collectives() const { return state_->check_collectives; }

void Group::all_reduce(torch::Tensor& tensor, ReduceOp op, const std::string& tag) {
  require_contiguous(tensor, "all_reduce");
  torch::Tensor staged = to_backend(*state_, tensor, "all_reduce");
  const std::chrono::milliseconds timeout = state_->timeout;
  start(*state_, describe("all_reduce", tensor, tag), [&](C10dBackend& pg) {
    std::vector<at::Tensor> tensors{staged};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d_op(op);
    options.timeout = timeout;
    return pg.allreduce(tensors, options);
  }).wait();
  if (op == ReduceOp::AVG_BY_DIVISION) staged.div_(state_->size);
  from_backend(tensor, staged);
}

PendingWork Group::all_reduce_async(torch::Tensor& tensor, const std::string& tag) {
  require_contiguous(tensor, "all_reduce");
  require_on_backend(*state_, tensor, "all_reduce");
  const std::chrono::milliseconds timeout = state_->timeout;
  return start(*state_, describe("all_reduce", tensor, tag), [&](C10dBackend& pg) {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    options.timeout = timeout;
    return pg.allreduce(tensors, options);
  });
}

void Group::gather(const torch::Tensor& tensor, std::vector<torch::Tensor>* gather_list, int dst,
                   const std::string& tag) {
  require_contiguous(tensor, "gather");
  require_rank(*state_, dst, "gather", "destination");
  if ((rank() == dst) != (gather_list != nullptr)) {
    throw Error("gather: give a gather_list on the destination rank only (rank " +
                std::to_string(rank()) + ", destination " + std::to_string(dst) + ")");
  }
  const torch::Tensor staged = to_backend(*state_, tensor, "gather");
  std::vector<std::vector<at::Tensor>> outputs;
  if (gather_list) {
    gather_list->clear();
    for (int r = 0; r < size(); ++r) gather_list->push_back(torch::empty_like(staged));
    outputs.push_back(*gather_list);
  }
  const std::chrono::milliseconds timeout = state_->timeout;
  start(*state_, describe("gather", tensor, tag), [&](C10dBackend& pg) {
    std::vector<at::Tensor> inputs{staged};
    c10d::GatherOptions options;
    options.rootRank = dst;
    options.timeout = timeout;
    return pg.gather(outputs, inputs, options);
  }).wait();
  if (gather_list) {
    for (auto& t : *gather_list) t = t.to(tensor.device());
  }
}

void Group::scatter(torch::Tensor& tensor, const std::vector<torch::Tensor>* scatter_list, int src,
                    const std::string& tag) {
  require_contiguous(tensor, "scatter");
  require_rank(*state_, src, "scatter", "source");
  if ((rank() == src) != (scatter_list != nullptr)) {
    throw Error("scatter: give a scatter_list on the source rank only (rank " +
                std::to_string(rank()) + ", source " + std::to_string(src) + ")");
  }
  if (scatter_list && static_cast<int>(scatter_list->size()) != size()) {
    throw Error("scatter: scatter_list has " + std::to_string(scatter_list->size()) +
                " tensors, one per rank (" + std::to_string(size()) + ") is needed");
  }
  std::vector<std::vector<at::Tensor>> inputs;
  if (scatter_list) {
    std::vector<at::Tensor> list;
    for (const auto& t : *scatter_list) list.push_back(to_backend(*state_, t.contiguous(), "scatter"));
    inputs.push_back(list);
  }
  torch::Tensor staged = to_backend(*state_, tensor, "scatter");
  const std::chrono::milliseconds timeout = state_->timeout;
  start(*state_, describe("scatter", tensor, tag), [&](C10dBackend& pg) {
    std::vector<at::Tensor> outputs{staged};
    c10d::ScatterOptions options;
    options.rootRank = src;
    options.timeout = timeout;
    return pg.scatter(outputs, inputs, options);
  }).wait();
  from_backend(tensor, staged);
}

void Group::broadcast(torch::Tensor& tensor, int src, const std::string& tag) {
  require_contiguous(tensor, "broadcast");
  require_rank(*state_, src, "broadcast", "source");
  torch::Tensor staged = to_backend(*state_, tensor, "broadcast");
  const std::chrono::milliseconds timeout = state_->timeout;
  start(*state_, describe("broadcast", tensor, tag), [&](C10dBackend& pg) {
    std::vector<at::Tensor> tensors{staged};
    c10d::BroadcastOptions options;
    options.rootRank = src;
    options.timeout = timeout;
    return pg.broadcast(tensors, options);
  }).wait();
  from_backend(tensor, staged);
}

std::vector<torch::Tensor> Group::all_gather(const torch::Tensor& tensor, const std::string& tag) {
  require_contiguous(tensor, "all_gather");
  const torch::Tensor staged = to_backend(*state_, tensor, "all_gather");
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < size(); ++r) outputs[0].push_back(torch::empty_like(staged));
  const std::chrono::milliseconds timeout = state_->timeout;
  start(*state_, describe("all_gather", tensor, tag), [&](C10dBackend& pg) {
    std::vector<at::Tensor> inputs{staged};
    c10d::AllgatherOptions options;
    options.timeout = timeout;
    return pg.allgather(outputs, inputs, options);
  }).wait();
  for (auto& t : outputs[0]) t = t.to(tensor.device());
  return outputs[0];
}

void Group::reduce_scatter(torch::Tensor& output, const std::vector<torch::Tensor>& inputs,
                           ReduceOp op, const std::string& tag) {
  require_contiguous(output, "reduce_scatter");
  if (static_cast<int>(inputs.size()) != size()) {
    throw Error("reduce_scatter: inputs has " + std::to_string(inputs.size()) +
                " tensors, one per rank (" + std::to_string(size()) + ") is needed");
  }
  if (op != ReduceOp::SUM && op != ReduceOp::AVG_BY_DIVISION) {
    throw Error("reduce_scatter: only SUM and AVG_BY_DIVISION are supported");
  }
  std::vector<std::vector<at::Tensor>> lists(1);
  for (const auto& t : inputs) {
    if (!t.sizes().equals(output.sizes()) || t.scalar_type() != output.scalar_type()) {
      throw Error("reduce_scatter: every input must have the output's shape and dtype");
    }
    lists[0].push_back(to_backend(*state_, t.contiguous(), "reduce_scatter"));
  }
  const std::chrono::milliseconds timeout = state_->timeout;
  if (backend() == "nccl") {
    torch::Tensor staged = to_backend(*state_, output, "reduce_scatter");
    start(*state_, describe("reduce_scatter", output, tag), [&](C10dBackend& pg) {
      std::vector<at::Tensor> outputs{staged};
      c10d::ReduceScatterOptions options;
      options.reduceOp = c10d::ReduceOp::SUM;
      options.timeout = timeout;
      return pg.reduce_scatter(outputs, lists, options);
    }).wait();
    from_backend(output, staged);
  } else {
    // Gloo in LibTorch 1.13 has no reduce_scatter: the same result as a reduction of the
    // concatenated inputs, of which this rank keeps its own part (recorded as what it is).
    torch::Tensor flat = torch::cat(lists[0]).reshape(-1);
    start(*state_, describe("reduce_scatter", output, tag + (tag.empty() ? "" : " ") + "(as all_reduce)"),
          [&](C10dBackend& pg) {
            std::vector<at::Tensor> tensors{flat};
            c10d::AllreduceOptions options;
            options.reduceOp = c10d::ReduceOp::SUM;
            options.timeout = timeout;
            return pg.allreduce(tensors, options);
          }).wait();
    output.copy_(flat.narrow(0, rank() * output.numel(), output.numel()).view(output.sizes()));
  }
  if (op == ReduceOp::AVG_BY_DIVISION) output.div_(size());
}

void Group::barrier(const std::string& tag) {
  const std::chrono::milliseconds timeout = state_->timeout;
  start(*state_, describe("barrier", torch::Tensor(), tag), [&](C10dBackend& pg) {
    c10d::BarrierOptions options;
    options.timeout = timeout;
    return pg.barrier(options);
  }).wait();
}

PendingWork Group::send_async(const torch::Tensor& tensor, int dst, const std::string& tag) {
  require_contiguous(tensor, "send");
  require_rank(*state_, dst, "send", "destination");
  if (dst == rank()) throw Error("send: rank " + std::to_string(dst) + " cannot send to itself");
  require_on_backend(*state_, tensor, "send");
  CommRecord record = describe("send", tensor, tag);
  record.peer = dst;
  return start(*state_, std::move(record), [&](C10dBackend& pg) {
    std::vector<at::Tensor> tensors{tensor};
    return pg.send(tensors, dst, /*tag=*/0);
  }, " to rank " + std::to_string(dst));
}

PendingWork Group::recv_async(torch::Tensor& tensor, int src, const std::string& tag) {
  require_contiguous(tensor, "recv");
  require_rank(*state_, src, "recv", "source");
  if (src == rank()) throw Error("recv: rank " + std::to_string(src) + " cannot receive from itself");
  require_on_backend(*state_, tensor, "recv");
  CommRecord record = describe("recv", tensor, tag);
  record.peer = src;
  return start(*state_, std::move(record), [&](C10dBackend& pg) {
    std::vector<at::Tensor> tensors{tensor};
    return pg.recv(tensors, src, /*tag=*/0);
  }, " from rank " + std::to_string(src));
}

void Group::send(const torch::Tensor& tensor, int dst, const std::string& tag) {
  require_contiguous(tensor, "send");
  send_async(to_backend(*state_, tensor, "send"), dst, tag).wait();
}

void Group::recv(torch::Tensor& tensor, int src, const std::string& tag) {
  require_contiguous(tensor, "recv");
  torch::Tensor staged = to_backend(*state_, tensor, "recv");
  recv_async(staged, src, tag).wait();
  from_backend(tensor, staged);
}

std::unique_ptr<Group> wrap_process_group(c10::intrusive_ptr<C10dBackend> pg, int rank,
                                          int size, std::chrono::milliseconds timeout,
                                          std::string backend, int local_rank,
                                          int local_world_size, int ranks_on_this_machine) {
  auto state = std::make_unique<Group::State>();
  state->pg = std::move(pg);
  state->rank = rank;
  state->size = size;
  state->timeout = timeout;
  state->backend = std::move(backend);
  state->local_rank = local_rank;
  state->local_world_size = local_world_size;
  state->ranks_on_this_machine = std::max(ranks_on_this_machine, local_world_size);
  return std::make_unique<Group>(std::move(state));
}

void attach_heartbeat(Group& group, c10::intrusive_ptr<c10d::Store> store, std::unique_ptr<Heartbeat> heartbeat) {
  group.state().store = std::move(store);
  group.state().heartbeat = std::move(heartbeat);
}

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

}  // namespace dtlab::dist
