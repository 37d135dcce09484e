// What the process holds, as the kernel counts it (/proc/self/status), beside the kit's tensor
// meter (report/tensor_bytes.h): the figure a student checks with `ps` or `top`.
#pragma once

#include <cstdint>
#include <string>

namespace dtlab::report {

// Note [Memory a rank holds]: three moments of every run, each rank's.
//   - after start-up: LibTorch loaded, the ranks joined, the data read, before the model is built
//     (what every rank holds whatever it trains: code, the allocator's arenas, the data set;
//     recorded by the driver, glue/run.cpp and lm/run.cpp);
//   - the load's peak: the most the process held up to the first step (the checkpoint read, the
//     model built, cut into pieces or slices);
//   - the steps' peak: the most it held in its training steps (the kernel's peak is reset at the
//     first step, after the heap's free memory was given back, so the load's peak does not hide
//     in it, and again after each evaluation, which FSDP runs on the whole model, gathered).
// "Held" is the resident set (VmRSS / VmHWM): pages of the heap, of mappings and of the program.
struct ProcessMemory {
  int64_t rss_bytes = -1;       // VmRSS; -1 where the kernel does not say
  int64_t peak_rss_bytes = -1;  // VmHWM: the peak since the process began or the last reset
};

// This process's figures from /proc/self/status.
ProcessMemory read_process_memory();
// The same parse of a status text (tested on fixed texts).
ProcessMemory parse_process_status(const std::string& status);
// Resets the kernel's peak (VmHWM) to the present resident set (writes 5 to
// /proc/self/clear_refs, Linux 4.0 and later); false where the kernel refuses.
bool reset_peak_rss();
// Gives the heap's free memory back to the kernel (glibc's malloc_trim), whatever the
// thresholds (Note [Keeping freed memory] in core/main.h).
void give_back_free_heap();

}  // namespace dtlab::report
