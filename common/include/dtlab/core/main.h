// The one place where exceptions become messages and exit codes, shared by every binary.
#pragma once

#include <functional>
#include <optional>

namespace CLI {
class App;
}

namespace dtlab {

// Note [Keeping freed memory]: LibTorch 1.13's CPU allocator is posix_memalign, and glibc
// serves a block above its mmap threshold (128 KiB, growing to at most 32 MiB) with fresh pages
// from the kernel and gives them back when it is freed; it also trims the heap's top when more
// than 128 KiB is free there. A training step frees and allocates the same activations every
// step, so every step paid the kernel to zero and fault in its activations again: measured on
// bench_task1 tiny (batch 64 x 128, 2 threads), 0.307 s a step against 0.272 with the memory kept,
// and elementwise operators such as gelu took twice as long as the same operators in eager
// PyTorch. keep_freed_memory() raises both thresholds to 1 GiB, so blocks below that come from
// the heap and stay with the process: it keeps its peak heap, as PyTorch's caching allocators do.
// Numbers do not change, only where their memory comes from. run_main calls it first unless told
// not to: a benchmark's --plain (model/ops.h), and zero and tp, whose lesson is the memory a rank
// frees (a unit after its stage, the whole model after its slices are cut): there the kernel's
// resident set must fall when they free, as `ps` shows a student (Note [Memory a rank holds] in
// report/process_memory.h). Every run gives the heap's free memory back once, before its first
// step, so that what loading freed never counts as held.
void keep_freed_memory();

// Runs body() and maps what it throws to one line on stderr and an ExitCode:
//   NotImplemented -> "TODO not done: <message>", kExitNotImplemented
//   Error          -> "error: <message>", kExitUsage
//   anything else  -> "internal error: <what>", kExitInternal (LibTorch's backtrace trimmed)
int run_main(const char* program, const std::function<int()>& body, bool keep_memory = true);

// Parses argv into app. Returns the exit code to stop with when parsing ends the program
// (kExitOk after --help, kExitUsage after a bad flag, CLI11's message printed), else nullopt.
std::optional<int> parse_flags(CLI::App& app, int argc, char** argv);

}  // namespace dtlab
