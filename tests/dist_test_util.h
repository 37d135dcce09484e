// Distributed tests without a network rendezvous: every rank is a thread of this process, the
// ranks meet in one c10d HashStore and talk through Gloo over 127.0.0.1.
#pragma once

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/types.h>
#include <torch/utils.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dtlab/dist/detail/c10d.h"

namespace dtlab::test {

constexpr std::chrono::milliseconds kRankTimeout{20000};

// One intra-op thread: the ranks already share the two cores. (With OpenMP the setting is per
// thread, so every rank thread sets it too.)
inline void single_threaded_torch() { torch::set_num_threads(1); }

// torch::manual_seed seeds the one global generator that every thread draws from: ranks that
// build a model "with the same seed" must do so one at a time. Hold this lock across seeding
// and construction.
inline std::mutex& global_generator_mutex() {
  static std::mutex m;
  return m;
}

// Runs body(group) on `world` ranks, each a thread with its own ProcessGroupGloo over one shared
// HashStore. The groups live until every rank's body has returned (so no rank closes its
// connections while another still reads from them). If any rank throws, throws a
// std::runtime_error naming the rank that failed first (later failures are usually timeouts
// waiting for it) and listing the others.
inline void run_ranks(int world, const std::function<void(dist::Group&)>& body) {
  single_threaded_torch();
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::unique_ptr<dist::Group>> groups(world);
  std::vector<std::exception_ptr> errors(world);
  std::vector<int> error_order(world, -1);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      single_threaded_torch();
      SCOPED_TRACE("rank " + std::to_string(rank) + " of " + std::to_string(world));
      try {
        auto options = c10d::ProcessGroupGloo::Options::create(kRankTimeout);
        options->devices = {c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")};
        auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);
        groups[rank] = dist::wrap_process_group(pg, rank, world, kRankTimeout, "gloo");
        groups[rank]->state().make_backend = [store](const std::string& prefix, int sub_rank, int sub_size) {
          auto sub_options = c10d::ProcessGroupGloo::Options::create(kRankTimeout);
          sub_options->devices = {c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")};
          return c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::PrefixStore>(prefix, store),
                                                             sub_rank, sub_size, sub_options);
        };
        body(*groups[rank]);
      } catch (...) {
        errors[rank] = std::current_exception();
        error_order[rank] = failures++;
      }
    });
  }
  for (auto& t : threads) t.join();
  groups.clear();  // all bodies are done: the process groups may close their connections now

  if (failures == 0) return;
  auto what = [&](int r) -> std::string {
    try {
      std::rethrow_exception(errors[r]);
    } catch (const std::exception& e) {
      return e.what();
    } catch (...) {
      return "a non-standard exception";
    }
  };
  int first = 0;
  for (int r = 0; r < world; ++r) {
    if (error_order[r] == 0) first = r;
  }
  std::string message = "rank " + std::to_string(first) + " of " + std::to_string(world) +
                        " failed: " + what(first);
  for (int r = 0; r < world; ++r) {
    if (r != first && errors[r]) message += "\n  (then rank " + std::to_string(r) + ": " + what(r) + ")";
  }
  throw std::runtime_error(message);
}

// All gradients of the parameters, flattened and concatenated in parameter order (an undefined
// gradient is a run of NaN, so that it never compares equal to anything).
inline torch::Tensor flat_grads(const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> parts;
  for (const auto& p : parameters) {
    parts.push_back(p.grad().defined() ? p.grad().detach().reshape(-1).clone()
                                       : torch::full({p.numel()}, std::nan(""), p.options()));
  }
  return torch::cat(parts);
}

// The rows [rank * n / world, (rank + 1) * n / world) of t: this rank's shard of a global batch.
inline torch::Tensor shard_rows(const torch::Tensor& t, int rank, int world) {
  const int64_t n = t.size(0);
  return t.slice(0, rank * n / world, (rank + 1) * n / world);
}

}  // namespace dtlab::test
