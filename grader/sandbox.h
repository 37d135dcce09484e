// Note [The sandbox]: every run the grader makes (a student's ranks, and the kit's own reference
// runs, the same way) starts inside one sandbox, and a submission is compiled inside one too.
// Student code is untrusted: it runs with the rights its checks need and no more.
//
// A run: the grader starts dtlab-sandbox-launcher (grader/sandbox_launcher.cpp) inside the sandbox;
// it starts every rank with launch_ranks (launch.h), waits for them within the deadline, kills
// whatever they left running, and streams back over a pipe how each rank ended and the regular
// files of the scratch folder (output/, dump/, logs/), each under a size limit, never following a
// link. The grader writes those files itself into RESULTS/runs/<id>/: nothing a rank does can put
// a link, a FIFO or a late rewrite where the grader reads, and results.json and the report are
// written after every process of the run is gone.
//
// Modes (`grader check --sandbox`, recorded in the grade's provenance):
// - bwrap: Debian's bubblewrap. New user, PID, network, IPC, UTS and mount namespaces: only
//   loopback (Gloo works, nothing else is reachable); a root of /usr, /etc, the rank binary, the
//   fixtures and LibTorch's folders, read-only; the scratch folder and /tmp tmpfs of bounded size;
//   the source tree (solutions/, golden data), the build tree (reference binaries) and the results
//   folder are not mounted. When the launcher returns, bwrap's PID 1 ends and the kernel kills what
//   is left. Run as root, the grader first becomes the sandbox uid (below), so the process limit
//   counts (the kernel exempts root from it) and bwrap binds folders by descriptors opened as root.
// - user: where user namespaces are forbidden (a container whose seccomp filter refuses them):
//   the launcher runs as a uid of the run's own (root is needed to switch), in a network
//   namespace of its own when root may make one, with the same rlimits; when the ranks are done
//   every process of that uid is killed. Files are not hidden: the sandbox uid must not be able to read solutions/
//   (file permissions) — the docs say so.
// - none: no isolation (only by request: --sandbox none).
// `auto` takes bwrap if it can start a sandbox here, else user if the grader is root, else fails
// with the reason (grading untrusted code without isolation is asked for by name).
//
// Limits of every process of a run (rlimits, set before the sandbox starts, inherited): processes
// and threads, address space (CPU runs only: CUDA reserves far more address space than it uses),
// file size, open files, no core files. Of the whole run, watched by the launcher four times a
// second: how many processes it holds (a fork bomb would starve the ranks of CPU until the
// deadline) and their resident memory (the address space limit is per process); the wall clock
// (the whole group killed); the scratch tmpfs size; and what comes back (per file, in all, and
// each log cut to its last part).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "launch.h"

namespace dtlab::grader {

enum class SandboxMode { kBubblewrap, kUser, kNone };
std::string sandbox_mode_name(SandboxMode mode);

struct SandboxLimits {
  uint64_t processes = 512;                     // RLIMIT_NPROC: processes and threads of the run
  uint64_t run_processes = 64;                  // more processes in a run: stopped (the ranks never fork)
  uint64_t memory_bytes = 0;                    // the run's resident memory, all processes (0: 3/4 of RAM)
  uint64_t address_space = 8ull << 30;          // RLIMIT_AS per process (CPU runs)
  uint64_t file_size = 256ull << 20;            // RLIMIT_FSIZE: any one file, logs included
  uint64_t open_files = 1024;                   // RLIMIT_NOFILE
  uint64_t scratch_bytes = 1ull << 30;          // the scratch tmpfs (bwrap)
  uint64_t tmp_bytes = 256ull << 20;            // /tmp (bwrap)
  uint64_t copy_file_bytes = 128ull << 20;      // one file brought back
  uint64_t copy_total_bytes = 512ull << 20;     // all files brought back
  uint64_t copy_files = 4096;                   // how many files brought back
  uint64_t log_bytes = 1ull << 20;              // each rank log: its last part
};

// Note [Sanitized builds]: a grader built with AddressSanitizer or ThreadSanitizer (make asan,
// make tsan; docs/SANITIZERS.md) runs rank binaries built the same way, whose runtime reserves
// terabytes of shadow address space at start: RLIMIT_AS would stop every run before main, so
// such a build leaves it off (the launcher's watch still stops a run holding 3/4 of the RAM).
// The sanitizers' settings (ASAN_OPTIONS, ...) reach the ranks, and a suppressions= file they
// name is mounted read-only, so a rank reads the same suppressions as the test that started it.
// Such a run gets the same memory limit as the sanitizer's own (hard_rss_limit_mb in
// kSanitizerOptions, the variable of this build's sanitizer).
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DTLAB_SANITIZER_OPTIONS "ASAN_OPTIONS"
#elif __has_feature(thread_sanitizer)
#define DTLAB_SANITIZER_OPTIONS "TSAN_OPTIONS"
#endif
#endif
#if !defined(DTLAB_SANITIZER_OPTIONS) && defined(__SANITIZE_ADDRESS__)
#define DTLAB_SANITIZER_OPTIONS "ASAN_OPTIONS"
#elif !defined(DTLAB_SANITIZER_OPTIONS) && defined(__SANITIZE_THREAD__)
#define DTLAB_SANITIZER_OPTIONS "TSAN_OPTIONS"
#endif
#ifdef DTLAB_SANITIZER_OPTIONS
inline constexpr bool kSanitizedBuild = true;
inline constexpr const char* kSanitizerOptions = DTLAB_SANITIZER_OPTIONS;
#else
inline constexpr bool kSanitizedBuild = false;
inline constexpr const char* kSanitizerOptions = "";
#endif

struct Sandbox {
  SandboxMode mode = SandboxMode::kNone;
  // The sandbox's uid when the grader is root: bwrap's runs all take it; in user mode each run
  // takes an unused one from uid .. uid + 4095 (DTLAB_SANDBOX_UID moves the range).
  uid_t uid = 61000;
  gid_t gid = 61000;
  bool limit_address_space = !kSanitizedBuild;  // false for runs on GPUs, and Note [Sanitized builds]
  SandboxLimits limits;
  std::string note;   // what the mode could not do here (user mode without a network namespace)
  std::filesystem::path launcher;                     // dtlab-sandbox-launcher
  std::vector<std::filesystem::path> read_only;       // folders and files mounted read-only (bwrap)
};

// The mode `requested` ("auto", "bwrap", "user", "none") resolves to here; throws dtlab::Error
// with the reason when it cannot run (bwrap missing or refused, user mode without root).
Sandbox choose_sandbox(const std::string& requested, const std::filesystem::path& launcher);

// One run inside the sandbox. spec's args may name "{scratch}" (the run's writable folder);
// spec.log_dir is ignored (logs are logs/rank<r>.log of the scratch folder).
struct SandboxRun {
  LaunchSpec spec;
  std::filesystem::path copy_to;              // scratch's output/ and dump/ land here, logs/* too
  std::vector<std::filesystem::path> inputs;  // read-only inside (bwrap): binary, fixtures
};

struct SandboxResult {
  LaunchResult launch;                 // rank logs at copy_to/rank<r>.log
  std::vector<std::string> left_out;   // "output/x (why)": files not brought back
  int strays_killed = 0;               // processes still alive after the ranks ended
  double sandbox_seconds = 0;          // start of the sandbox to the last file back
};

// Throws dtlab::Error when the sandbox cannot start or the launcher does not report (killed).
SandboxResult run_in_sandbox(const Sandbox& sandbox, const SandboxRun& run);

// A command (the compiler, via cmake) in a sandbox with no network whose file system holds /usr,
// /etc, `visible` read-only, `writable` read-write, and none of `hidden` (a file is /dev/null on a
// nodev mount, so opening it fails with "Permission denied" while its name still lists; a folder
// is an empty tmpfs): a submission's compile step cannot read solutions/ or what they built.
// In user and none modes the command runs as it is: the compiler runs no student code, but an
// #include can read what the grader's user can (docs/GRADING.md says so).
struct CompileJail {
  std::vector<std::filesystem::path> visible, writable, hidden;
};
std::vector<std::string> compile_command(const Sandbox& sandbox, const CompileJail& jail,
                                         const std::vector<std::string>& argv);

}  // namespace dtlab::grader
