// Where a process computes: the CPU, or a CUDA GPU where this LibTorch has CUDA and the machine
// has one (Note [Devices]). Asked before anything waits on anything, so that a machine without a
// GPU says so at once, in one line, instead of failing inside a collective or a kernel launch.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <string>

namespace dtlab {

// Note [Devices]
// - A rank of a data-parallel run computes on the CPU with Gloo and on cuda:<local rank> with
//   NCCL (the GPU of its place among the ranks of its host, as torchrun's users set it); Gloo
//   with GPUs is not offered: NCCL is what GPUs use.
// - A pipeline's device numbers are CUDA indices where CUDA is present (several stages may share
//   one GPU), and name CPU workers (threads) where it is not.
// - CUDA is present when this LibTorch has CUDA (a build with the CUDA half of a pip torch;
//   Debian's 1.13 and the CPU half have none), the process loaded it (where a GPU driver is:
//   Note [The CUDA half where a GPU is], core/cuda_half.h) AND it sees a GPU (CUDA_VISIBLE_DEVICES
//   not empty). Asked of LibTorch at run time, once.
// - Every rank, stage and thread makes its device the current one (use_device) before its first
//   CUDA call, so that NCCL's communicators and the caching allocator bind to the right GPU.
//   Everything runs on each device's current (default) stream: a copy between devices orders
//   both devices' streams (LibTorch's copy_ does), so no stream of the kit's own needs
//   record_stream or events.

struct CudaAvailability {
  bool in_libtorch = false;  // this LibTorch registers CUDA (its CUDA half is loaded)
  int devices = 0;           // GPUs this process sees
  // Where the build has a CUDA half that this process did not load: why (core/cuda_half.h).
  std::string half_not_loaded;
};

// This process's answer (asked of LibTorch once, then remembered).
CudaAvailability cuda_availability();

// Why CUDA cannot be used: "" when it can; otherwise one sentence that names what is missing.
std::string why_no_cuda(const CudaAvailability& cuda);

// What `what` (a flag, "--backend nccl") needs CUDA for: throws dtlab::Error naming it and what
// is missing, with the way out (`instead`).
void require_cuda(const CudaAvailability& cuda, const std::string& what, const std::string& instead);

// --backend's own check, made before any rank waits for another: nccl needs CUDA here.
void require_backend_usable(const std::string& backend, const CudaAvailability& cuda);

// The device of a rank of a data-parallel run (Note [Devices]): the CPU for "gloo"; for "nccl"
// cuda:<local_rank>, an error when CUDA is missing or the host runs more ranks than it has GPUs.
torch::Device rank_device(const std::string& backend, int rank, int local_rank, const CudaAvailability& cuda);

// The device of pipeline device number `index` (a partition's): cuda:<index> where CUDA is
// present (an error when index >= the GPUs seen), the CPU otherwise.
torch::Device stage_device(int index, const CudaAvailability& cuda);

// "cpu", "cuda" (cuda:0), "cuda:N": a --device flag. Errors name the flag and the value.
torch::Device parse_device(const std::string& text, const std::string& flag);

// Where a module's parameters are (its first parameter's device; the CPU without parameters):
// where the kit puts the batches it evaluates or generates with.
torch::Device device_of(const torch::nn::Module& module);

// Makes `device` the current device of this thread (CUDA); nothing for the CPU.
void use_device(const torch::Device& device);

// Waits for the device's queued work (CUDA; nothing for the CPU): before reading a clock.
void synchronize_device(const torch::Device& device);

}  // namespace dtlab
