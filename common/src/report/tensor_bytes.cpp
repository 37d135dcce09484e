// Counts the storage of CPU tensors, see report/tensor_bytes.h.
#include "dtlab/report/tensor_bytes.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <mutex>

namespace dtlab::report {
namespace {

std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_largest{0};
std::atomic<int64_t> g_allocated{0};

void add(int64_t bytes) {
  const int64_t now = g_current.fetch_add(bytes) + bytes;
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}

// One allocation of the wrapped allocator and its size.
struct Counted {
  c10::DataPtr inner;
  int64_t bytes;
};

void delete_counted(void* context) {
  auto* counted = static_cast<Counted*>(context);
  g_current.fetch_sub(counted->bytes);
  delete counted;  // frees the storage through the wrapped allocator's deleter
}

class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* wrapped) : wrapped_(wrapped) {}

  // LibTorch 2.x made allocate non-const and added copy_data (Note [Counting allocator]).
#if TORCH_VERSION_MAJOR >= 2
  c10::DataPtr allocate(size_t n) override { return counted(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#else
  c10::DataPtr allocate(size_t n) const override { return counted(n); }
#endif

 private:
  c10::DataPtr counted(size_t n) const {
    c10::DataPtr inner = wrapped_->allocate(n);
    void* data = inner.get();
    const c10::Device device = inner.device();
    add(static_cast<int64_t>(n));
    g_allocated.fetch_add(static_cast<int64_t>(n));
    int64_t largest = g_largest.load();
    while (static_cast<int64_t>(n) > largest && !g_largest.compare_exchange_weak(largest, static_cast<int64_t>(n))) {
    }
    return {data, new Counted{std::move(inner), static_cast<int64_t>(n)}, &delete_counted, device};
  }

  c10::Allocator* wrapped_;
};

class Meter final : public TensorBytes {};

TensorBytes* g_installed = nullptr;

}  // namespace

TensorBytes& TensorBytes::install() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Never destroyed: storage allocated through it may outlive every static.
    static auto* allocator = new CountingAllocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(allocator, /*priority=*/100);
    g_installed = new Meter();
  });
  return *g_installed;
}

TensorBytes* TensorBytes::installed() { return g_installed; }

int64_t TensorBytes::current() const { return g_current.load(); }
int64_t TensorBytes::peak() const { return g_peak.load(); }
void TensorBytes::reset_peak() { g_peak.store(g_current.load()); }
int64_t TensorBytes::largest() const { return g_largest.load(); }
int64_t TensorBytes::allocated() const { return g_allocated.load(); }
void TensorBytes::reset_largest() { g_largest.store(0); }

}  // namespace dtlab::report
