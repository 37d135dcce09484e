// The resident figures every run prints beside the tensor meter (Note [Memory a rank holds] in
// report/process_memory.h): the kernel's words parsed, and its peak reset to what is held now.
#include "dtlab/report/process_memory.h"

#include <gtest/gtest.h>

#include <sys/mman.h>

#include <cstring>

namespace process_memory_test {

TEST(ProcessMemory, ParsesTheKernelsStatusLines) {
  const dtlab::report::ProcessMemory m = dtlab::report::parse_process_status(
      "Name:\tgrader\nVmPeak:\t  999 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\nThreads:\t1\n");
  EXPECT_EQ(m.rss_bytes, 1024 * 1024);
  EXPECT_EQ(m.peak_rss_bytes, 2048 * 1024);
  const dtlab::report::ProcessMemory none = dtlab::report::parse_process_status("Name:\tx\nVmRSS:\tmany kB\n");
  EXPECT_EQ(none.rss_bytes, -1);
  EXPECT_EQ(none.peak_rss_bytes, -1);
}

// 256 MiB touched and freed: the peak holds it until reset, then starts again from what is held.
TEST(ProcessMemory, ThePeakHoldsWhatWasFreedUntilItIsReset) {
  constexpr size_t kBytes = size_t{256} << 20;
  const dtlab::report::ProcessMemory before = dtlab::report::read_process_memory();
  ASSERT_GT(before.rss_bytes, 0) << "this kernel gives no /proc/self/status";
  // Pages of the kernel's own (not malloc's, which a sanitizer keeps in quarantine).
  void* mapped = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  char* block = static_cast<char*>(mapped);
  std::memset(block, 1, kBytes);
  const dtlab::report::ProcessMemory touched = dtlab::report::read_process_memory();
  EXPECT_GE(touched.rss_bytes - before.rss_bytes, static_cast<int64_t>(kBytes * 9 / 10));
  ::munmap(mapped, kBytes);
  const dtlab::report::ProcessMemory freed = dtlab::report::read_process_memory();
  EXPECT_LT(freed.rss_bytes, touched.rss_bytes - static_cast<int64_t>(kBytes * 9 / 10));
  // The kernel folds each thread's counts into the peak in batches: a few pages may lag.
  EXPECT_GE(freed.peak_rss_bytes - before.rss_bytes, static_cast<int64_t>(kBytes * 9 / 10));
  ASSERT_TRUE(dtlab::report::reset_peak_rss()) << "the kernel refused to reset VmHWM";
  const dtlab::report::ProcessMemory reset = dtlab::report::read_process_memory();
  EXPECT_LT(reset.peak_rss_bytes, touched.rss_bytes - static_cast<int64_t>(kBytes / 2));
}

}  // namespace process_memory_test
