// BLAS detection and thread configuration, see train/runtime.h.
#include "dtlab/core/libtorch_compat.h"
#include "dtlab/train/runtime.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>
#include <torch/version.h>

#include <algorithm>
#include <fstream>

namespace dtlab::train {
namespace {

bool contains(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

}  // namespace

BlasInfo detect_blas() {
  BlasInfo info;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const std::string file = path.substr(path.rfind('/') + 1);
    if (contains(file, "openblas") || contains(file, "libblas") || contains(file, "mkl_rt") ||
        contains(file, "libmkl") || contains(file, "blis") || contains(file, "flexiblas")) {
      info.path = path;
      break;
    }
  }
  // OpenBLAS names itself, with its build options (USE_OPENMP) and the kernel it picked.
  using ConfigFn = char* (*)();
  if (auto config = reinterpret_cast<ConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"))) {
    info.name = config();
    if (auto core = reinterpret_cast<ConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"))) {
      info.name += std::string(" core=") + core();
    }
  } else if (contains(info.path, "mkl")) {
    info.name = "MKL";
  } else if (contains(info.path, "blis")) {
    info.name = "BLIS";
  } else if (contains(info.path, "/blas/") || contains(info.path, "libblas")) {
    info.name = "reference BLAS (netlib)";
    info.slow = true;
  } else if (info.path.empty() && at::hasMKL()) {
    info.name = "MKL (linked into LibTorch)";  // PyPI's x86-64 wheels
  } else if (info.path.empty()) {
    info.name = "none found (LibTorch's own kernels or a statically linked BLAS)";
  } else {
    info.name = "unknown";
  }
  return info;
}

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, compat::interop_threads());
}

int configure_threads(int requested, int ranks_sharing_the_cores) {
  const int threads = requested > 0 ? requested
                                    : std::max(1, available_cores() / std::max(1, ranks_sharing_the_cores));
  at::set_num_threads(threads);
  // OpenBLAS's pthread build keeps its own pool; tell it too when it is the one loaded.
  using SetFn = void (*)(int);
  if (auto set = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(threads);
  return threads;
}

std::string describe_runtime() {
  const BlasInfo blas = detect_blas();
  std::string s = "BLAS " + blas.name;
  if (!blas.path.empty()) s += " (" + blas.path + ")";
  s += " | threads " + std::to_string(at::get_num_threads());
  s += " | " + libtorch_build();
  if (blas.slow) {
    s += "\nwarning: the reference BLAS is many times slower than OpenBLAS; run scripts/setup.sh "
         "or select libopenblas0-openmp with update-alternatives";
  }
  return s;
}

std::string libtorch_build() {
#ifdef DTLAB_TORCH_DESCRIPTION  // set by cmake/DtlabTorch.cmake
  return DTLAB_TORCH_DESCRIPTION;
#else
  return "LibTorch " TORCH_VERSION;
#endif
}

std::string host_name() {
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  return name;
}

}  // namespace dtlab::train
