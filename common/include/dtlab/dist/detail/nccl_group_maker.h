// The one function libdtlab_cuda_half.so exports, as both sides see it: the library defines it
// (common/cuda_half/nccl_group.cpp, which checks its definition against this type) and
// dist/rendezvous.cpp finds it by dlsym (Note [The CUDA half where a GPU is], core/cuda_half.h).
// Written once, so that a change on one side alone fails to compile instead of crashing a rank.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

#include "dtlab/core/libtorch_compat.h"

namespace dtlab::dist::detail {

// ProcessGroupNCCL over `store` for `rank` of `world_size`, with `timeout`, into `out`.
using MakeNcclGroup = void(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
                           std::chrono::milliseconds timeout, c10::intrusive_ptr<compat::CollectiveBackend>& out);
inline constexpr char kMakeNcclGroupSymbol[] = "dtlab_make_nccl_group";

}  // namespace dtlab::dist::detail
