// The three gradient-synchronisation strategies, see train/gradient_sync.h.
#include "dtlab/train/gradient_sync.h"

#include <fmt/format.h>

#include "dtlab/dist/ddp.h"
#include "dtlab/report/timing.h"

namespace dtlab::train {
namespace {

class NoSync final : public GradientSync {
 public:
  double after_backward() override { return 0; }
  std::string describe() const override { return "one process: no gradient synchronisation"; }
};

class SyncAfterBackward final : public GradientSync {
 public:
  SyncAfterBackward(SyncFunction sync, torch::nn::Module& module, dist::Group& group, std::string name)
      : sync_(std::move(sync)), module_(module), group_(group), name_(std::move(name)) {}
  double after_backward() override {
    report::Stopwatch watch;
    sync_(module_, group_);
    return watch.seconds();
  }
  std::string describe() const override { return "gradients averaged by " + name_ + " after backward"; }

 private:
  SyncFunction sync_;
  torch::nn::Module& module_;
  dist::Group& group_;
  std::string name_;
};

class SyncByDdp final : public GradientSync {
 public:
  explicit SyncByDdp(std::unique_ptr<dist::DistributedDataParallel> ddp) : ddp_(std::move(ddp)) {}
  double after_backward() override { return ddp_->last_wait_seconds(); }
  std::string describe() const override {
    return fmt::format("DistributedDataParallel, {} buckets reduced during backward", ddp_->buckets().size());
  }
  nlohmann::json details() const override {
    nlohmann::json buckets = nlohmann::json::array();
    for (const auto& b : ddp_->buckets()) buckets.push_back({{"parameters", b.parameters.size()}, {"bytes", b.bytes}});
    return {{"ddp_buckets", buckets}};
  }

 private:
  std::unique_ptr<dist::DistributedDataParallel> ddp_;
};

}  // namespace

std::unique_ptr<GradientSync> no_sync() { return std::make_unique<NoSync>(); }

std::unique_ptr<GradientSync> sync_after_backward(SyncFunction sync, torch::nn::Module& module,
                                                  dist::Group& group, std::string name) {
  return std::make_unique<SyncAfterBackward>(std::move(sync), module, group, std::move(name));
}

std::unique_ptr<GradientSync> sync_by_ddp(std::unique_ptr<dist::DistributedDataParallel> ddp) {
  return std::make_unique<SyncByDdp>(std::move(ddp));
}

}  // namespace dtlab::train
