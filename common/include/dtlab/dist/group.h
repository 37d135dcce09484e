// A process group for the exercises: torch.distributed's collectives (all_reduce, gather,
// scatter, broadcast, barrier) over a c10d ProcessGroup (Gloo, or NCCL where LibTorch has it),
// each with the run's timeout, each recorded in a CommLog (task 4 reads it), and every failure
// turned into a dtlab::DistError that says which rank, which collective and what to check.
//
// Threading contract: like c10d's ProcessGroup, every rank must call the same collectives in
// the same order. Blocking calls may be made from any one thread at a time; all_reduce_async
// may be called from the autograd thread (DDP's hooks) while no blocking call is in flight.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
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

// One collective as this rank saw it.
struct CommRecord {
  std::string op;      // "all_reduce", "gather", "scatter", "broadcast", "barrier"
  std::vector<int64_t> shape;
  std::string dtype;   // "float32", ...
  int64_t bytes = 0;   // bytes of this rank's tensor
  double seconds = 0;  // from the call to completion (for async: to wait())
  std::string tag;     // who asked: "gradients", "ddp bucket 3", "loss", ...
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

// An all_reduce in flight (DDP launches them from autograd hooks).
class PendingWork {
 public:
  PendingWork() = default;
  // Blocks until done or the group's timeout; throws DistError on failure. Records the time.
  void wait();
  bool valid() const { return work_ != nullptr; }

 private:
  friend class Group;
  c10::intrusive_ptr<c10d::Work> work_;
  class Group* group_ = nullptr;
  CommRecord record_;
  std::chrono::steady_clock::time_point start_;
};

class Group {
 public:
  // Wraps an existing c10d process group (tests build these over a HashStore).
  Group(c10::intrusive_ptr<c10d::ProcessGroup> pg, int rank, int size,
        std::chrono::milliseconds timeout, std::string backend);
  ~Group();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& backend() const { return backend_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // Ranks that run on this host (found at rendezvous; 1 for groups made without one).
  int local_world_size() const { return local_world_size_; }
  int local_rank() const { return local_rank_; }

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
  void barrier(const std::string& tag = "");

  CommLog& log() { return log_; }
  c10d::ProcessGroup& process_group() { return *pg_; }

  // Internal: completes a work item or throws DistError naming the collective.
  void finish(c10::intrusive_ptr<c10d::Work>& work, CommRecord& record,
              std::chrono::steady_clock::time_point start);

  void set_locality(int local_rank, int local_world_size) {
    local_rank_ = local_rank;
    local_world_size_ = local_world_size;
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> pg_;
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  std::string backend_;
  int local_rank_ = 0, local_world_size_ = 1;
  CommLog log_;
  int64_t sequence_ = 0;  // collectives issued, for error messages
};

// Rendezvous and process group: rank 0 serves a c10d TCPStore at master_addr:master_port, every
// rank registers and waits for all the others (up to the timeout; the error names the ranks
// that never arrived), then a ProcessGroupGloo bound to --interface or to the local address that
// reaches the master (or ProcessGroupNCCL with each rank on its local GPU). World size 1 needs
// no network. A port in use, an unreachable master, a rank that never arrives: one DistError
// line each.
std::unique_ptr<Group> init_process_group(const Settings& settings);

}  // namespace dtlab::dist
