// Note [LibTorch versions]: the kit builds against Debian 12's LibTorch 1.13.1 and against PyPI's
// torch 2.x (built and tested at the pin in scripts/setup.sh, 2.15.0). Everything that differs
// between them in the C++ the kit uses is named here, and only here; the rest of the code uses
// these names and never tests a version itself.
//
//   what                              1.13                              2.x (since)
//   C++ standard                      C++17                             C++20 (2.15's headers stop
//                                                                       C++17 with #error; the
//                                                                       build uses 20 for all 2.x)
//   c10d's Gloo and NCCL groups       derive from c10d::ProcessGroup    derive from c10d::Backend
//                                                                       (2.0; ProcessGroup became
//                                                                       a dispatcher over Backends)
//   a leaf's gradient accumulator     std::shared_ptr<Node>             c10::intrusive_ptr<Node>
//   (autograd::impl::grad_accumulator)                                  (2.10 or earlier)
//   an optimiser's per-parameter      keyed by the TensorImpl's         keyed by the TensorImpl*
//   state map (Optimizer::state())    address printed as a string       itself (2.x)
//   c10::guts::to_string              exists                            removed (the kit uses std)
//   at::get_num_interop_threads()     int                               size_t
//
// Behaviour that differs with the same API is handled where it shows, and listed here:
//   a TCPStore client's reads      bounded by its timeout            a recv without timeout in the
//   (a silent server)                                                constructor's ping and after a
//                                                                    wait's cancel: Note [Bounded
//                                                                    store calls], dist/rendezvous.cpp
//   at::dropout's noise            contiguous                        the input's strides (empty_like):
//                                                                    Note [Dropout's mask]
//
// The build side (cmake/DtlabTorch.cmake, Note [Which LibTorch]) chooses the standard, and links
// only libtorch_cpu.so and libc10.so of a pip wheel; it also hides the {fmt} headers that 2.x
// wheels ship in torch/include/fmt (12.x), so the kit always compiles against the one {fmt} it
// links, Debian's libfmt-dev.
#pragma once

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/optim/optimizer.h>
#include <torch/version.h>

#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

namespace c10d {
class Backend;
class ProcessGroup;
}  // namespace c10d

namespace dtlab::compat {

// The c10d class that Gloo's and NCCL's process groups derive from: what dist::Group drives.
#if TORCH_VERSION_MAJOR >= 2
using CollectiveBackend = c10d::Backend;
#else
using CollectiveBackend = c10d::ProcessGroup;
#endif

// The handle LibTorch gives to a leaf's gradient accumulator (DDP's hooks hang on it).
using GradAccumulator =
    decltype(torch::autograd::impl::grad_accumulator(std::declval<const torch::autograd::Variable&>()));

// The key of a parameter in torch::optim::Optimizer::state(), whatever the version's key type.
using OptimizerStateMap =
    std::remove_cv_t<std::remove_reference_t<decltype(std::declval<torch::optim::Optimizer&>().state())>>;
using OptimizerStateKey = OptimizerStateMap::key_type;

// (A template, so that only the branch of this version's key type is compiled.)
template <typename Key = OptimizerStateKey>
Key optimizer_state_key(const at::Tensor& parameter) {
  void* const impl = parameter.unsafeGetTensorImpl();
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream key;  // as 1.13's c10::guts::to_string(void*): the address in hex
    key << impl;
    return key.str();
  } else {
    return impl;
  }
}

// LibTorch's inter-op thread count as an int.
inline int interop_threads() { return static_cast<int>(at::get_num_interop_threads()); }

}  // namespace dtlab::compat
