// libdtlab_cuda_half.so: Note [The CUDA half where a GPU is] (dtlab/core/cuda_half.h). The one
// library of the kit that links LibTorch's CUDA half; a program loads it at start where a GPU
// driver is, and finds ProcessGroupNCCL's constructor here (dist/rendezvous.cpp).
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <chrono>
#include <type_traits>

#include "dtlab/core/libtorch_compat.h"
#include "dtlab/dist/detail/nccl_group_maker.h"

// A CUDA LibTorch built without NCCL has no ProcessGroupNCCL: the library then holds nothing, and
// rendezvous.cpp, compiled under the same macro, never asks for it.
#ifdef USE_C10D_NCCL
// C linkage so that dlsym finds it by this name (kMakeNcclGroupSymbol); its type is checked below
// against the one the caller casts to.
extern "C" __attribute__((visibility("default"))) void dtlab_make_nccl_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size, std::chrono::milliseconds timeout,
    c10::intrusive_ptr<dtlab::compat::CollectiveBackend>& out) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  out = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, options);
}

static_assert(std::is_same_v<decltype(dtlab_make_nccl_group), dtlab::dist::detail::MakeNcclGroup>,
              "dtlab_make_nccl_group must have the type dist/rendezvous.cpp calls it by (nccl_group_maker.h)");
#endif  // USE_C10D_NCCL
