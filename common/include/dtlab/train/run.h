// A training run set up once, before any data or model: who this process is (from the flags or
// a launcher's variables), its process group, its threads, and the environment results.json
// records. Every driver starts here.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>

#include "dtlab/dist/group.h"
#include "dtlab/dist/settings.h"

namespace dtlab::train {

struct Run {
  std::string name;          // the exercise: printed and written to results.json
  dist::Settings settings;   // who this process is
  std::unique_ptr<dist::Group> group;  // null on one process
  int threads = 1;           // LibTorch's intra-op threads
  // Where the model, its batches and its gradients live: the group's device (the CPU with Gloo,
  // cuda:<local rank> with NCCL; Note [Devices] in core/device.h); the CPU on one process.
  torch::Device device = torch::kCPU;

  int rank() const { return group ? group->rank() : 0; }
  int world() const { return group ? group->size() : 1; }
  bool lead() const { return rank() == 0; }  // the rank that prints and writes
  // hostname, LibTorch, BLAS, threads, world size, backend, launcher, ranks on this host.
  nlohmann::json environment() const;
  // "ranks 4 (flags), backend gloo, master 127.0.0.1:29500, timeout 60 s"; "" on one process.
  std::string describe_ranks() const;
};

// Who this process is, from launch (the flags) and the launcher's variables; no network yet,
// so that every flag can be checked before any rank waits for another (--backend nccl on a
// machine without a GPU included). launch null: one process.
Run plan_run(std::string name, const dist::LaunchFlags* launch);

// Joins the other ranks with setup (the exercise's own, for example task2b::setup; for one
// process nothing is joined) and sets the thread count (threads <= 0: the cores available to
// each rank of this host).
using SetupFunction = std::function<std::unique_ptr<dist::Group>(const dist::Settings&)>;
void start_run(Run& run, const SetupFunction& setup, int threads);

}  // namespace dtlab::train
