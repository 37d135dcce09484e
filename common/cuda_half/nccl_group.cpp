// libdtlab_cuda_half.so: Note [The CUDA half where a GPU is] (dtlab/core/cuda_half.h). The one
// library of the kit that links LibTorch's CUDA half; a program loads it at start where a GPU
// driver is, and finds ProcessGroupNCCL's constructor here (dist/rendezvous.cpp).
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <chrono>

#include "dtlab/core/libtorch_compat.h"

// C linkage so that dlsym finds it by this name; the caller declares the same signature
// (NcclGroupMaker in rendezvous.cpp), and both are compiled by one build against one LibTorch.
extern "C" __attribute__((visibility("default"))) void dtlab_make_nccl_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size, std::chrono::milliseconds timeout,
    c10::intrusive_ptr<dtlab::compat::CollectiveBackend>& out) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  out = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, options);
}
