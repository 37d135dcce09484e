// Note [The CUDA half where a GPU is] (dtlab/core/cuda_half.h): the loader.
#include "dtlab/core/cuda_half.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace dtlab {
namespace {

std::mutex& lock() {
  static std::mutex m;
  return m;
}

CudaHalf& state() {
  static CudaHalf s;
  return s;
}

void* handle = nullptr;

// Under lock(). Loads the library (RTLD_GLOBAL: its CUDA libraries' symbols serve later loads).
void load_locked(CudaHalf& s) {
#ifdef DTLAB_CUDA_HALF_LIBRARY
  if (s.loaded) return;
  dlerror();
  handle = ::dlopen(DTLAB_CUDA_HALF_LIBRARY, RTLD_NOW | RTLD_GLOBAL);
  if (handle) {
    s.loaded = true;
    s.why_not.clear();
  } else {
    const char* error = dlerror();
    s.why_not = std::string("its library did not load (") + (error ? error : DTLAB_CUDA_HALF_LIBRARY) + ")";
  }
#else
  (void)s;
#endif
}

// Where the machine has a GPU driver, or the environment asks: Note [The CUDA half where a GPU is].
void decide_at_start() {
  std::lock_guard<std::mutex> guard(lock());
  CudaHalf& s = state();
  s.built = DTLAB_HAVE_CUDA == 1;
#ifdef DTLAB_CUDA_HALF_EVERYWHERE
  s.in_every_program = true;
#endif
  const char* asked = std::getenv(kCudaHalfVariable);
  const std::string setting = asked ? asked : "";
  if (!setting.empty() && setting != "load" && setting != "skip") {
    std::fprintf(stderr, "%s=%s: expected load or skip (or unset: load where a GPU driver is)\n", kCudaHalfVariable,
                 setting.c_str());
    std::_Exit(2);
  }
  if (!s.built) return;
  if (setting == "skip") {
    s.why_not = "DTLAB_CUDA_HALF=skip";
    return;
  }
  if (setting != "load" && !s.in_every_program && ::access("/dev/nvidiactl", F_OK) != 0 && ::access("/dev/dxg", F_OK) != 0) {
    s.why_not = "this machine has no NVIDIA driver (no /dev/nvidiactl; DTLAB_CUDA_HALF=load loads it anyway)";
    return;
  }
  load_locked(s);
}

__attribute__((constructor(101))) void load_cuda_half_at_start() { decide_at_start(); }

}  // namespace

const CudaHalf& cuda_half() { return state(); }

const CudaHalf& load_cuda_half() {
  std::lock_guard<std::mutex> guard(lock());
  CudaHalf& s = state();
  if (s.built) load_locked(s);
  return s;
}

void* cuda_half_symbol(const char* name) {
  std::lock_guard<std::mutex> guard(lock());
  return handle ? ::dlsym(handle, name) : nullptr;
}

}  // namespace dtlab
