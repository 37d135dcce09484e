// The CUDA half of a pip torch, loaded at start where a GPU driver is and nowhere else.
#pragma once

#include <string>

namespace dtlab {

// Note [The CUDA half where a GPU is]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A build against a CUDA wheel (cmake/DtlabTorch.cmake) has two halves: libtorch_cpu.so, which
// every program links, and libtorch_cuda.so with libc10_cuda.so, whose loading is what registers
// CUDA with LibTorch (its device guard, its hooks) and which ProcessGroupNCCL lives in. Loading
// the CUDA half costs about 0.3 s of CPU and 370 MB of address space a process, and a ctest pass
// starts some 1,500 processes on machines that have no GPU. So no program links it: the kit's own
// shared library libdtlab_cuda_half.so does (with the NCCL group's constructor, its only code),
// and a constructor in every program that uses the kit's devices or process groups (core/device.cpp
// and dist/rendezvous.cpp reference it, and so bring the loader's object out of dtlab_common; the
// rank programs are held to it by Grader.EveryRankProgramOfTheBuildHoldsTheCudaHalfLoader) loads
// it with dlopen before anything else runs, where this machine has a GPU driver (/dev/nvidiactl;
// /dev/dxg under WSL), or where DTLAB_CUDA_HALF=load asks for it (DTLAB_CUDA_HALF=skip: never).
// - Before anything else: LibTorch asks for its CUDA hooks once and keeps the answer (ATen's
//   getCUDAHooks, "CUDA is permanently disabled for that copy of ATen"), and torch::manual_seed
//   already asks. Priority 101, before the fork server's 102 (its ranks then inherit the load).
// - A machine without the driver cannot run CUDA whatever is loaded: it loses nothing, and
//   why_no_cuda (core/device.h) says which of the two was missing.
// - The sandbox mounts the library's own folder (build/lib, nothing else in it) read-only.
// The variable that overrides the start-up's decision; a program whose bytes hold this name (with
// its terminating NUL) links the loader, which is what a test of the build reads for.
inline constexpr char kCudaHalfVariable[] = "DTLAB_CUDA_HALF";

struct CudaHalf {
  bool built = false;   // this build has a CUDA half (DTLAB_HAVE_CUDA)
  bool loaded = false;  // this process loaded it
  // A LibTorch found by find_package links its CUDA half into every program (its torch target):
  // CUDA is registered in every process, and the kit's library is loaded everywhere too.
  bool in_every_program = false;
  std::string why_not;  // when built and not loaded: one sentence (no driver; DTLAB_CUDA_HALF=skip; dlopen's error)
};

// This process's state: decided by the start-up loader (or by load_cuda_half since).
const CudaHalf& cuda_half();

// Loads the CUDA half now if this build has one and it is not loaded yet, whatever the machine
// (a test of the library itself); returns the state.
const CudaHalf& load_cuda_half();

// A symbol of libdtlab_cuda_half.so, nullptr when it is not loaded (or has no such symbol).
void* cuda_half_symbol(const char* name);

}  // namespace dtlab
