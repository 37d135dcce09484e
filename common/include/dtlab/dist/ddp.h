// DistributedDataParallel for LibTorch modules (LibTorch has none): gradients reduced in
// buckets while backward still runs, as PyTorch's DDP does.
//
// Note [Bucket order]: gradients become ready roughly in reverse order of the parameters'
// registration (the last layer's first), so buckets are filled in reverse parameter order. The
// first bucket is small (kFirstBucketBytes) so that communication starts early; the others are
// capped at bucket_cap_bytes. As in PyTorch, a bucket is closed as soon as it reaches its cap, so
// it may exceed the cap by its last parameter; with a cap of 1 byte every parameter after the
// first bucket is a bucket of its own (the first bucket still fills to kFirstBucketBytes).
// Buckets are reduced strictly in bucket order on every rank (collectives must match).
//
// Note [When a bucket is reduced]: a post hook on each parameter's gradient accumulator marks
// the parameter ready once its .grad holds this backward's gradient; when the last parameter
// of a bucket is ready, the bucket's gradients are copied into one flat tensor and its
// all_reduce is launched asynchronously, so it overlaps the rest of backward. A callback queued
// on the autograd engine runs when backward ends: it waits for every bucket, divides by the
// world size and writes the averages back into .grad. So after loss.backward() returns, every
// rank holds the same averaged gradients, ready for clipping and the optimizer step.
//
// Threading contract: the hooks and the final callback run on the autograd thread; construct,
// no_sync and the accessors are called from the training thread between iterations.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dtlab/core/libtorch_compat.h"
#include "dtlab/dist/group.h"

namespace dtlab::dist {

constexpr int64_t kDefaultBucketBytesCap = 25 * 1024 * 1024;  // PyTorch's bucket_cap_mb=25
constexpr int64_t kFirstBucketBytes = 1024 * 1024;              // PyTorch's first bucket, 1 MiB

struct DdpOptions {
  int64_t bucket_cap_bytes = kDefaultBucketBytesCap;
  int64_t first_bucket_bytes = kFirstBucketBytes;
  // Parameters that may get no gradient in an iteration. Without it such a parameter is an
  // error at the end of backward (never silently wrong gradients); with it, its gradient counts
  // as zero and its bucket is reduced when backward ends.
  bool find_unused_parameters = false;
  bool broadcast_buffers = true;  // buffers too are copied from rank 0 at construction
};

// One bucket: which parameters (indices into the module's parameters(), frozen and repeated
// tied ones included in the numbering) and how many bytes.
struct BucketLayout {
  std::vector<size_t> parameters;
  int64_t bytes = 0;
};

class DistributedDataParallel {
 public:
  // Copies rank 0's parameters and buffers to every rank (broadcast_module_state), so ranks that
  // started from different random weights agree; lays out the buckets; registers the hooks.
  // Parameters with requires_grad=false are left out of the buckets. Parameters shared by
  // several modules (tied weights) are reduced once.
  DistributedDataParallel(std::shared_ptr<torch::nn::Module> module, Group& group,
                          DdpOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // While the returned guard lives, backward passes only accumulate gradients locally
  // (gradient accumulation); the first backward after it ends synchronises the accumulated sum.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp);
    ~NoSyncGuard();

   private:
    DistributedDataParallel& ddp_;
  };
  NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  const std::vector<BucketLayout>& buckets() const { return layout_; }
  torch::nn::Module& module() { return *module_; }
  // Seconds the final callback spent waiting for buckets in the last backward: the part of
  // communication that did not overlap computation.
  double last_wait_seconds() const { return last_wait_seconds_; }

  // Internal, called from the hooks.
  void mark_ready(size_t parameter);

 private:
  struct Bucket;
  // The constructor's jobs, in order.
  std::vector<size_t> collect_parameters();  // returns each one's index in module parameters()
  void build_buckets(const std::vector<size_t>& position);
  void register_hooks();
  void launch(size_t bucket);
  void finalize();
  void reset();

  std::shared_ptr<torch::nn::Module> module_;
  Group& group_;
  DdpOptions options_;
  std::vector<torch::Tensor> params_;      // unique, requiring grad, in registration order
  std::vector<std::string> names_;
  std::vector<BucketLayout> layout_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<size_t> bucket_of_;          // parameter -> bucket
  std::vector<bool> ready_;
  size_t next_bucket_ = 0;                 // the next bucket to launch, see Note [Bucket order]
  std::vector<compat::GradAccumulator> accumulators_;
  std::vector<uintptr_t> hook_keys_;
  bool callback_queued_ = false;
  bool sync_enabled_ = true;
  double last_wait_seconds_ = 0;
  std::shared_ptr<bool> alive_;
};

// The bucket layout for tensors of these sizes in bytes, in parameter order, following
// Note [Bucket order]. Exposed for tests and the handout.
std::vector<BucketLayout> compute_bucket_layout(const std::vector<int64_t>& parameter_bytes,
                                                int64_t bucket_cap_bytes, int64_t first_bucket_bytes);

}  // namespace dtlab::dist
