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
#include "dtlab/report/process_memory.h"

namespace dtlab::train {

struct Run {
  std::string name;          // the exercise: printed and written to results.json
  dist::Settings settings;   // who this process is
  std::unique_ptr<dist::Group> group;  // null on one process
  int threads = 1;           // LibTorch's intra-op threads
  // Where the model, its batches and its gradients live: the group's device (the CPU with Gloo,
  // cuda:<local rank> with NCCL; Note [Devices] in core/device.h); the CPU on one process.
  torch::Device device = torch::kCPU;
  // Note [Memory a rank holds] (report/process_memory.h): the resident set after start-up (the
  // driver's, once its data is read and before its model is built), the load's peak (train_loop,
  // at the first step) and the training steps' peak (train_loop: evaluations left out).
  report::ProcessMemory after_startup;
  int64_t load_peak_rss_bytes = -1;
  int64_t steps_peak_rss_bytes = -1;
  bool peak_reset = true;  // false: the kernel refused a reset, and the steps' peak includes loading
  // The kit's tensor meter (report/tensor_bytes.h), beside the resident set: the most bytes every
  // tensor of the process took at once in the training steps (train_loop, evaluations left out);
  // at the end of training the bytes of the parameters this rank holds (each storage once) and of
  // its optimiser's state; the most bytes of gradients its parameters held at an update
  // (TrainState::gradient_bytes). -1: not measured (the meter is installed by the driver; a
  // sharded step does not go through apply_update).
  int64_t tensor_steps_peak_bytes = -1;
  int64_t parameter_bytes = -1;
  int64_t optimizer_state_bytes = -1;
  int64_t gradient_bytes = -1;

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

// results.json's "memory": each rank's resident set after start-up, its load's peak and its
// training steps' peak (Note [Memory a rank holds]), gathered from every rank (a collective: every
// rank calls it, after training), with the kit's tensor meter beside them where it is installed.
nlohmann::json memory_section(Run& run);

// results.json's "compute": the model FLOPs of a training step's tokens (flops_per_token, a
// function of the rows' padded length) against the ranks' measured peak (Note [The machine's
// peak] in report/peak_flops.h), from `timing` (results.json's): each rank's peak, the model's
// FLOPs a second and their ratio, the MFU. Every rank measures its peak here, after training, and
// the figures are gathered: a collective. Without timed steps, only the peaks.
nlohmann::json compute_section(Run& run, const std::function<double(double sequence)>& flops_per_token,
                               const nlohmann::json& timing);
// "compute: 0.41 GFLOP/s of model FLOPs, MFU 1.9% of the 2 ranks' measured peak (21.7 GFLOP/s)".
std::string compute_line(const nlohmann::json& compute);
// "memory: rank 0 held at most 412.3 MiB while training (start-up 301.2 MiB, so +111.1 MiB; the
// load peaked at 520.0 MiB); ranks 1-3 at most ..." from that section.
std::string memory_line(const nlohmann::json& memory);

}  // namespace dtlab::train
