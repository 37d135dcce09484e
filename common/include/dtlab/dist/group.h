// A process group for the exercises: torch.distributed's collectives (all_reduce, broadcast,
// gather, scatter, all_gather, reduce_scatter, barrier) and point-to-point send/recv over a c10d
// ProcessGroup (Gloo, or NCCL where LibTorch has it). Every operation waits at most the run's
// timeout, is recorded in a CommLog (task 4 reads it) and is numbered; every failure becomes a
// dtlab::DistError that says which rank, which operation (its number and tag) and what to check.
//
// Threading contract: like c10d's ProcessGroup, every rank must issue the same collectives in
// the same order. Blocking calls may be made from any one thread at a time; the *_async calls
// may also be made from the autograd thread (DDP's hooks) while no blocking call is in flight.
// send/recv pair up by (peer, order), as in c10d: a stage sends to the next and receives from
// the previous in the same order on both sides.
//
// c10d's headers stay out of this one (student headers include it): the group is made by
// init_process_group, or for tests by dist/detail/c10d.h's wrap_process_group.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/dist/settings.h"

namespace dtlab::dist {

using dtlab::DistError;  // see core/error.h

enum class ReduceOp { SUM, AVG_BY_DIVISION, MAX, MIN };

// One operation as this rank saw it.
struct CommRecord {
  std::string op;      // "all_reduce", "gather", "scatter", "broadcast", "all_gather",
                       // "reduce_scatter", "send", "recv", "barrier"
  std::vector<int64_t> shape;
  std::string dtype;   // "float32", ...
  int64_t bytes = 0;   // bytes of this rank's tensor
  double seconds = 0;  // from the call to completion (for async: to wait())
  std::string tag;     // who asked: "gradients", "ddp bucket 3", "loss", ...
  int64_t sequence = 0;  // this rank's count of operations issued, from 1
  int peer = -1;         // send: the destination, recv: the source (ranks of this group); -1 otherwise
  // Async operations: the CPU seconds the posting thread spent from the call to the call of wait(),
  // the work it did while the operation was in flight (on a shared machine, wall time there would
  // count the time the thread was not running); -1 when wait() ran on another thread; 0 for
  // blocking operations.
  double before_wait = 0;
};

class CommLog {
 public:
  void add(CommRecord r);
  std::vector<CommRecord> records() const;
  void clear();
  // Bytes and seconds of the records whose op is `op` (all ops when empty) and whose tag starts
  // with tag_prefix.
  int64_t bytes(const std::string& op = "", const std::string& tag_prefix = "") const;
  double seconds(const std::string& op = "", const std::string& tag_prefix = "") const;

 private:
  mutable std::mutex mutex_;
  std::vector<CommRecord> records_;
};

namespace detail {
struct InFlight;  // a c10d work item and its record (dist/group.cpp)
}

// An operation in flight (DDP launches all_reduces from autograd hooks; pipelines send and
// receive while they compute). Keep it until wait(): one destroyed or overwritten before wait()
// makes this rank's next operation on the group throw a DistError naming it ("send #3
// (activation 1) to rank 1 was never waited for", Note [A dropped PendingWork] in
// dist/group.cpp). It must not outlive its Group.
class PendingWork {
 public:
  PendingWork();
  explicit PendingWork(std::unique_ptr<detail::InFlight> in_flight);  // made by Group
  ~PendingWork();
  PendingWork(PendingWork&&) noexcept;
  PendingWork& operator=(PendingWork&&) noexcept;
  // Blocks until done or the group's timeout; throws DistError on failure. Records the time.
  void wait();
  bool valid() const;

 private:
  std::unique_ptr<detail::InFlight> in_flight_;
};

class Group {
 public:
  struct State;  // the c10d process group and this rank's bookkeeping (dist/group.cpp)
  explicit Group(std::unique_ptr<State> state);
  ~Group();
  // The c10d side, for dist/detail/ only (State is defined there, out of student headers).
  State& state() { return *state_; }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const;
  int size() const;
  const std::string& backend() const;
  std::chrono::milliseconds timeout() const;
  // Ranks that run on this host (found at rendezvous; 1 for groups made without one). A host is
  // a host name and an address: network namespaces on one machine are different hosts.
  int local_world_size() const;
  int local_rank() const;
  // Ranks that share this machine's cores: the same running kernel (its boot id), whatever their
  // addresses. Network-namespace hosts of one machine count together here, so that each takes
  // its share of the cores (train::configure_threads). At least local_world_size().
  int ranks_on_this_machine() const;
  // Where this rank computes and its collectives take tensors (Note [Devices], core/device.h):
  // the CPU with Gloo, cuda:<local rank> with NCCL. Note [CPU tensors on NCCL] (dist/group.cpp):
  // a blocking operation of an NCCL group also takes a CPU tensor (carried to the GPU and back);
  // the *_async ones need their tensors here.
  torch::Device device() const;

  // In place on every rank: tensor becomes the reduction over ranks. AVG_BY_DIVISION is SUM
  // then division by size() (Gloo has no average).
  void all_reduce(torch::Tensor& tensor, ReduceOp op = ReduceOp::SUM, const std::string& tag = "");
  PendingWork all_reduce_async(torch::Tensor& tensor, const std::string& tag = "");

  // gather: every rank sends tensor; on dst, gather_list receives size() tensors (rank order).
  // gather_list must be null on the other ranks.
  void gather(const torch::Tensor& tensor, std::vector<torch::Tensor>* gather_list, int dst,
              const std::string& tag = "");
  // scatter: on src, scatter_list holds size() tensors; every rank receives its own into tensor.
  // scatter_list must be null on the other ranks.
  void scatter(torch::Tensor& tensor, const std::vector<torch::Tensor>* scatter_list, int src,
               const std::string& tag = "");
  void broadcast(torch::Tensor& tensor, int src, const std::string& tag = "");
  // all_gather: every rank sends tensor and receives size() tensors like it, in rank order.
  std::vector<torch::Tensor> all_gather(const torch::Tensor& tensor, const std::string& tag = "");
  // reduce_scatter: inputs holds size() tensors shaped like output; rank r's output becomes the
  // reduction (SUM or AVG_BY_DIVISION) over ranks of their inputs[r].
  void reduce_scatter(torch::Tensor& output, const std::vector<torch::Tensor>& inputs,
                      ReduceOp op = ReduceOp::SUM, const std::string& tag = "");
  void barrier(const std::string& tag = "");

  // Point to point. recv fills tensor, which must already have the sender's shape and dtype.
  void send(const torch::Tensor& tensor, int dst, const std::string& tag = "");
  void recv(torch::Tensor& tensor, int src, const std::string& tag = "");
  PendingWork send_async(const torch::Tensor& tensor, int dst, const std::string& tag = "");
  PendingWork recv_async(torch::Tensor& tensor, int src, const std::string& tag = "");

  CommLog& log();

  // The training step this rank is at (the loop says so before each): named, with the operation,
  // when another rank reports that this one stopped (Note [Who stopped], dist/detail/heartbeat.h).
  void note_step(int64_t step);

  // Note [Desync detection]: every rank must issue the same collectives in the same order; when
  // one does not (a rank that skips the gradient all_reduce reaches the loss all_reduce of the
  // others' gradient all_reduce), Gloo either hangs until the timeout or aborts with an internal
  // message. With the check on, every collective (not send/recv) is preceded by an all_gather of
  // what each rank is about to run: op, number, tag, dtype, shape. On any difference every rank
  // throws DesyncError (exit code 5) with one line that lists each rank's operation, e.g.
  //   rank 0: all_reduce #12 (gradients) float32 [2]; rank 1: all_reduce #12 (loss) float32 [1]
  // It costs one small all_gather per collective, so timing runs leave it off. The check itself
  // is not in the CommLog and has no number.
  void check_collectives(bool on);
  bool checks_collectives() const;

 private:
  std::unique_ptr<State> state_;
};

// Rendezvous and process group (dist/rendezvous.cpp): rank 0 serves a c10d TCPStore at
// master_addr:master_port, every rank registers and waits for all the others (up to the
// timeout; the error names the ranks that never arrived), then a ProcessGroupGloo bound to
// --interface or to the local address that reaches the master (or ProcessGroupNCCL with each
// rank on its local GPU). World size 1 needs no network. A port in use, an unreachable master,
// a rank that never arrives: one DistError line each.
std::unique_ptr<Group> init_process_group(const Settings& settings);

}  // namespace dtlab::dist
