// DistributedDataParallel: see Note [Bucket order] and Note [When a bucket is reduced] in
// dist/ddp.h.
#include "dtlab/dist/ddp.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/utils.h>

#include <chrono>
#include <set>

#include "dtlab/dist/broadcast_state.h"

namespace dtlab::dist {

struct DistributedDataParallel::Bucket {
  std::vector<size_t> parameters;
  torch::Tensor flat;  // all gradients of the bucket, concatenated
  size_t pending = 0;  // parameters not ready yet in this backward
  PendingWork work;
};

std::vector<BucketLayout> compute_bucket_layout(const std::vector<int64_t>& parameter_bytes,
                                                int64_t bucket_cap_bytes, int64_t first_bucket_bytes) {
  std::vector<BucketLayout> buckets;
  BucketLayout current;
  for (size_t k = parameter_bytes.size(); k-- > 0;) {
    current.parameters.push_back(k);
    current.bytes += parameter_bytes[k];
    const int64_t cap = buckets.empty() ? first_bucket_bytes : bucket_cap_bytes;
    if (current.bytes >= cap) {
      buckets.push_back(std::move(current));
      current = BucketLayout();
    }
  }
  if (!current.parameters.empty()) buckets.push_back(std::move(current));
  return buckets;
}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<torch::nn::Module> module,
                                                 Group& group, DdpOptions options)
    : module_(std::move(module)), group_(group), options_(options), alive_(std::make_shared<bool>(true)) {
  if (options_.bucket_cap_bytes <= 0 || options_.first_bucket_bytes <= 0) {
    throw Error("DDP bucket sizes must be positive");
  }
  const std::vector<size_t> position = collect_parameters();
  broadcast_module_state(*module_, group_, options_.broadcast_buffers, "ddp initial broadcast");
  build_buckets(position);
  register_hooks();
}

std::vector<size_t> DistributedDataParallel::collect_parameters() {
  // Unique parameters (tied weights appear once) that require a gradient, in registration order.
  std::set<const void*> seen;
  std::vector<size_t> position;  // of params_[i] in module_->parameters()
  size_t index = 0;
  for (const auto& item : module_->named_parameters(/*recurse=*/true)) {
    const size_t here = index++;
    if (!seen.insert(item.value().unsafeGetTensorImpl()).second) continue;
    if (!item.value().requires_grad()) continue;  // frozen: never reduced
    params_.push_back(item.value());
    names_.push_back(item.key());
    position.push_back(here);
  }
  return position;
}

void DistributedDataParallel::build_buckets(const std::vector<size_t>& position) {
  std::vector<int64_t> bytes;
  for (const auto& p : params_) bytes.push_back(p.numel() * p.element_size());
  const std::vector<BucketLayout> internal =
      compute_bucket_layout(bytes, options_.bucket_cap_bytes, options_.first_bucket_bytes);
  bucket_of_.assign(params_.size(), 0);
  for (size_t b = 0; b < internal.size(); ++b) {
    auto bucket = std::make_unique<Bucket>();
    bucket->parameters = internal[b].parameters;
    BucketLayout reported = internal[b];  // in the module's numbering, for buckets()
    for (size_t& i : reported.parameters) i = position[i];
    layout_.push_back(reported);
    int64_t numel = 0;
    for (size_t i : bucket->parameters) {
      bucket_of_[i] = b;
      numel += params_[i].numel();
      if (params_[i].scalar_type() != params_[bucket->parameters.front()].scalar_type()) {
        throw Error("DDP: parameters of one bucket must share a dtype (" + names_[i] + ")");
      }
    }
    bucket->flat = torch::zeros({numel}, params_[bucket->parameters.front()].options().requires_grad(false));
    buckets_.push_back(std::move(bucket));
  }
  ready_.assign(params_.size(), false);
  reset();
}

void DistributedDataParallel::register_hooks() {
  // Note [When a bucket is reduced]: one post hook per gradient accumulator.
  for (size_t i = 0; i < params_.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(params_[i]);
    std::weak_ptr<bool> alive = alive_;
    hook_keys_.push_back(accumulator->add_post_hook(
        std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [this, i, alive](const torch::autograd::variable_list& outputs,
                             const torch::autograd::variable_list&) {
              if (alive.lock()) mark_ready(i);
              return outputs;
            })));
    accumulators_.push_back(std::move(accumulator));  // keeps the node (and our hook) alive
  }
}

DistributedDataParallel::~DistributedDataParallel() {
  *alive_ = false;
  alive_.reset();
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
}

DistributedDataParallel::NoSyncGuard::NoSyncGuard(DistributedDataParallel& ddp) : ddp_(ddp) {
  ddp_.sync_enabled_ = false;
}

DistributedDataParallel::NoSyncGuard::~NoSyncGuard() { ddp_.sync_enabled_ = true; }

void DistributedDataParallel::reset() {
  std::fill(ready_.begin(), ready_.end(), false);
  for (auto& b : buckets_) b->pending = b->parameters.size();
  next_bucket_ = 0;
  callback_queued_ = false;
}

void DistributedDataParallel::mark_ready(size_t i) {
  if (!sync_enabled_) return;  // no_sync: gradients only accumulate
  if (!callback_queued_) {
    callback_queued_ = true;
    std::weak_ptr<bool> alive = alive_;
    torch::autograd::Engine::get_default_engine().queue_callback([this, alive] {
      if (alive.lock()) finalize();
    });
  }
  if (ready_[i]) {
    throw Error("DDP: parameter " + names_[i] + " was marked ready twice in one backward pass");
  }
  ready_[i] = true;
  Bucket& bucket = *buckets_[bucket_of_[i]];
  if (--bucket.pending == 0) {
    // Launch every bucket that is complete, in order (Note [Bucket order]).
    while (next_bucket_ < buckets_.size() && buckets_[next_bucket_]->pending == 0) launch(next_bucket_++);
  }
}

void DistributedDataParallel::launch(size_t b) {
  Bucket& bucket = *buckets_[b];
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (size_t i : bucket.parameters) {
    const torch::Tensor& grad = params_[i].grad();
    const int64_t n = params_[i].numel();
    if (grad.defined()) {
      bucket.flat.narrow(0, offset, n).copy_(grad.reshape(-1));
    } else {
      bucket.flat.narrow(0, offset, n).zero_();
    }
    offset += n;
  }
  bucket.work = group_.all_reduce_async(bucket.flat, "ddp bucket " + std::to_string(b));
}

void DistributedDataParallel::finalize() {
  const auto start = std::chrono::steady_clock::now();
  // Parameters that got no gradient in this backward.
  std::vector<std::string> unused;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (ready_[i]) continue;
    if (!options_.find_unused_parameters) {
      unused.push_back(names_[i]);
      continue;
    }
    ready_[i] = true;
    --buckets_[bucket_of_[i]]->pending;
  }
  if (!unused.empty()) {
    // Buckets already launched must still complete on every rank before we give up.
    for (size_t b = 0; b < next_bucket_; ++b) buckets_[b]->work.wait();
    reset();
    std::string list;
    for (size_t k = 0; k < unused.size() && k < 5; ++k) list += (k ? ", " : "") + unused[k];
    if (unused.size() > 5) list += ", ... (" + std::to_string(unused.size()) + " in all)";
    throw Error("DistributedDataParallel: parameter(s) " + list +
                " received no gradient in this backward pass. If the model really leaves them "
                "unused, set DdpOptions::find_unused_parameters; otherwise check the forward pass");
  }
  while (next_bucket_ < buckets_.size()) launch(next_bucket_++);

  torch::NoGradGuard no_grad;
  const double world = static_cast<double>(group_.size());
  for (auto& bucket : buckets_) {
    bucket->work.wait();
    bucket->flat.div_(world);
    int64_t offset = 0;
    for (size_t i : bucket->parameters) {
      torch::Tensor& p = params_[i];
      const int64_t n = p.numel();
      const torch::Tensor average = bucket->flat.narrow(0, offset, n).view(p.sizes());
      if (p.grad().defined()) {
        p.mutable_grad().copy_(average);
      } else {
        p.mutable_grad() = average.clone();
      }
      offset += n;
    }
  }
  last_wait_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  reset();
}

}  // namespace dtlab::dist
