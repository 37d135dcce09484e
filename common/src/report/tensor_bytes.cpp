// Counts the storage of CPU tensors, see report/tensor_bytes.h.
#include "dtlab/report/tensor_bytes.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

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

// One allocation of the wrapped allocator and its size, found by its data pointer: the DataPtr the
// meter hands out has the data pointer as its context too, as LibTorch's raw_allocate asserts
// (c10/core/Allocator.h: a kernel's scratch buffer released from its DataPtr and freed later
// through raw_deleter, as BERT's backward does on 1.13).
struct Counted {
  c10::DataPtr inner;
  int64_t bytes = 0;
};

std::mutex& live_mutex() {
  static auto* m = new std::mutex();  // never destroyed: storage may outlive every static
  return *m;
}

std::unordered_map<void*, Counted>& live() {
  static auto* m = new std::unordered_map<void*, Counted>();
  return *m;
}

c10::Allocator* g_wrapped = nullptr;  // the allocator the meter wraps (install())

void delete_counted(void* data) {
  Counted counted;
  bool found = false;
  {
    std::lock_guard<std::mutex> lock(live_mutex());
    const auto it = live().find(data);
    if (it != live().end()) {
      counted = std::move(it->second);
      live().erase(it);
      found = true;
    }
  }
  if (!found) {
    // Allocated before install() and handed back through raw_deleter: the wrapped allocator's.
    if (g_wrapped && g_wrapped->raw_deleter()) g_wrapped->raw_deleter()(data);
    return;
  }
  g_current.fetch_sub(counted.bytes);
  // counted.inner frees the storage through the wrapped allocator's deleter as it goes.
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
  c10::DeleterFnPtr raw_deleter() const override { return &delete_counted; }

 private:
  c10::DataPtr counted(size_t n) const {
    c10::DataPtr inner = wrapped_->allocate(n);
    void* data = inner.get();
    if (n == 0 || data == nullptr) return inner;  // nothing to count, and no key to find it by
    const c10::Device device = inner.device();
    {
      std::lock_guard<std::mutex> lock(live_mutex());
      live()[data] = Counted{std::move(inner), static_cast<int64_t>(n)};
    }
    add(static_cast<int64_t>(n));
    g_allocated.fetch_add(static_cast<int64_t>(n));
    int64_t largest = g_largest.load();
    while (static_cast<int64_t>(n) > largest && !g_largest.compare_exchange_weak(largest, static_cast<int64_t>(n))) {
    }
    return {data, data, &delete_counted, device};
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
    g_wrapped = c10::GetCPUAllocator();
    static auto* allocator = new CountingAllocator(g_wrapped);
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
