// How a data-parallel step makes every rank's gradients equal: a two-verb strategy, in the
// spirit of flashlight's Reducer (add / finalize). The kit's step calls
//
//   sync.before_backward();   // DDP arms nothing here; a strategy may reset its state
//   loss.backward();          // DDP reduces buckets while this runs
//   sync.after_backward();    // hand-written sync runs here; DDP waits for its last buckets
//
// and after after_backward returns every rank holds the same averaged gradients. Exercises
// supply a strategy (task 2a/2b: their sync_gradients; task 3: their DDP; the reference: none);
// the training loop has no other knowledge of how gradients travel.
#pragma once

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <string>

#include "dtlab/dist/group.h"

namespace dtlab::dist {
class DistributedDataParallel;
}

namespace dtlab::train {

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  virtual void before_backward() {}
  // Returns the seconds this rank spent waiting for gradient communication in this step: the
  // part that did not overlap computation.
  virtual double after_backward() = 0;
  // One line for the banner: "gradients averaged by sync_gradients after backward".
  virtual std::string describe() const = 0;
  // Details for results.json's "communication" section (DDP: "ddp_buckets").
  virtual nlohmann::json details() const { return nlohmann::json::object(); }
};

// One process: gradients are already the whole batch's.
std::unique_ptr<GradientSync> no_sync();

// A function the exercise wrote (task 2a/2b's sync_gradients, dp's average_gradients), called
// after backward on every rank and timed as a whole.
using SyncFunction = std::function<void(torch::nn::Module&, dist::Group&)>;
std::unique_ptr<GradientSync> sync_after_backward(SyncFunction sync, torch::nn::Module& module,
                                                  dist::Group& group, std::string name);

// DistributedDataParallel: buckets reduced during backward; after_backward reports the time its
// final callback waited. The strategy owns the wrapper (it must outlive training).
std::unique_ptr<GradientSync> sync_by_ddp(std::unique_ptr<dist::DistributedDataParallel> ddp);

}  // namespace dtlab::train
