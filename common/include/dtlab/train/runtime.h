// What this process computes with: the BLAS library actually loaded and the thread count, so
// that a slow number on the screen is never a mystery.
#pragma once

#include <string>

namespace dtlab::train {

struct BlasInfo {
  std::string name;     // "OpenBLAS 0.3.21 ... USE_OPENMP", "reference BLAS", "MKL", ...
  std::string path;     // the shared object mapped into this process
  bool slow = false;    // the reference (netlib) BLAS: many times slower on matrix products
};

// Reads /proc/self/maps for the BLAS that LibTorch's matrix products go to (Debian's LibTorch
// calls libblas.so.3, which the alternatives system points at a provider).
BlasInfo detect_blas();

// Cores this process may run on (sched_getaffinity), at least 1.
int available_cores();

// Sets LibTorch's intra-op thread count, which OpenBLAS's OpenMP build follows. requested <= 0
// means "this rank's share of the cores": available_cores() / ranks_sharing_the_cores, at least 1
// (the ranks of this machine, Group::ranks_on_this_machine). Returns the count set.
int configure_threads(int requested, int ranks_sharing_the_cores = 1);

// One line: "BLAS OpenBLAS 0.3.21 (...) | threads 2 | LibTorch 1.13.0 (found by find_package), C++17".
std::string describe_runtime();
// The LibTorch this program was built with, as the configure step printed it ("LibTorch 2.15.0
// (pip wheel, CPU half), C++20"): results.json's environment.libtorch_build.
std::string libtorch_build();

// This machine's host name (results.json's environment.hostname).
std::string host_name();

}  // namespace dtlab::train
