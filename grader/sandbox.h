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
// - bwrap: Debian's bubblewrap. New user, PID, network, IPC, UTS and mount namespaces and a new
//   session: only loopback (Gloo works, nothing else is reachable); a root of /usr, /etc, the
//   fixtures, LibTorch's folders and the build's lib/ (libdtlab_cuda_half.so alone), read-only,
//   and copies of the rank binary and of the files
//   the run reads (a training order), taken from descriptors the grader opened, so they may lie
//   where the sandbox uid cannot walk (a results folder of mode 0700); the scratch folder, /tmp
//   and /dev/shm tmpfs of bounded size, / and /dev read-only (a tmpfs's pages are no process's
//   resident memory: the memory watch would not see them); the source tree (solutions/, golden
//   data), the build tree (reference binaries) and the results folder are not mounted. When the
//   launcher returns, bwrap's PID 1 ends and the kernel kills what is left. Run as root, the
//   grader first becomes the sandbox uid (below), so the process limit counts (the kernel
//   exempts root from it) and bwrap binds folders by descriptors opened as root.
// - user: where user namespaces are forbidden (a container whose seccomp filter refuses them):
//   the launcher runs as a uid of the run's own (root is needed to switch), in a session of its
//   own (no controlling terminal: no TIOCSTI into the grader's), in a network namespace of its
//   own when root may make one, with the same rlimits; its binary and the files it reads are
//   copies in its scratch folder (mode 0700, its uid's); what the grader writes into the
//   results folder is the grader's alone (umask 077: no run reads another's results or dumps);
//   when the ranks are done every process of that uid is killed. Nothing else is hidden: a
//   submission is refused while the kit's answers are readable by the sandbox uid
//   (answers_readable_by_sandbox).
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
// each log cut to its last part). Of a whole grading: what all its runs bring back.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dtlab/core/sanitizer.h"  // DTLAB_ADDRESS_SANITIZER, DTLAB_THREAD_SANITIZER
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
  uint64_t shm_bytes = 64ull << 20;             // /dev/shm (bwrap); / and /dev are read-only
  uint64_t copy_file_bytes = 128ull << 20;      // one file brought back
  uint64_t copy_total_bytes = 512ull << 20;     // all files brought back by one run
  uint64_t copy_grading_bytes = 2ull << 30;     // all files brought back by every run of a grading
  uint64_t copy_files = 4096;                   // how many files brought back
  uint64_t log_bytes = 1ull << 20;              // each rank log: its last part
};

// The compile of a submission (Note [The sandbox]): rlimits of every process of it, and what of
// its output the grader keeps.
struct CompileLimits {
  uint64_t cpu_seconds = 600;                   // RLIMIT_CPU, per process (a template bomb)
  uint64_t address_space = 8ull << 30;          // RLIMIT_AS, per process
  uint64_t file_size = 256ull << 20;            // RLIMIT_FSIZE: an object or the binary (a few MiB)
  uint64_t processes = 64;                      // RLIMIT_NPROC, of the compile's own uid
  uint64_t tmp_bytes = 512ull << 20;            // /tmp (bwrap)
  uint64_t output_bytes = 64ull << 10;          // the compiler's output: its last part
  double seconds = 900;                         // wall clock of each command
};

// Note [Sanitized builds]: a grader built with AddressSanitizer or ThreadSanitizer (make asan,
// make tsan; docs/SANITIZERS.md) runs rank binaries built the same way, whose runtime reserves
// terabytes of shadow address space at start: RLIMIT_AS would stop every run before main, so
// such a build leaves it off (the launcher's watch still stops a run holding 3/4 of the RAM).
// The sanitizers' settings (ASAN_OPTIONS, ...) reach the ranks, and a suppressions= file they
// name is mounted read-only, so a rank reads the same suppressions as the test that started it.
// Such a run gets the same memory limit as the sanitizer's own (hard_rss_limit_mb in
// kSanitizerOptions, the variable of this build's sanitizer).
#if defined(DTLAB_ADDRESS_SANITIZER)
#define DTLAB_SANITIZER_OPTIONS "ASAN_OPTIONS"
#elif defined(DTLAB_THREAD_SANITIZER)
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
  CompileLimits compile_limits;
  // Bytes brought back so far by the runs of this grading (copies of a Sandbox share it), held
  // to limits.copy_grading_bytes: pp alone makes about 15 runs of up to 512 MiB each.
  std::shared_ptr<std::atomic<uint64_t>> copied = std::make_shared<std::atomic<uint64_t>>(0);
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

// The grader's own variables every sandboxed run sees, as NAME=VALUE: those that choose threads,
// devices and the backends' settings (OMP_*, OPENBLAS_*, GLOO_*, TORCH_*, ...) and DTLAB_*.
std::vector<std::string> environment_passed_to_runs();

// Throws dtlab::Error when the sandbox cannot start or the launcher does not report (killed).
SandboxResult run_in_sandbox(const Sandbox& sandbox, const SandboxRun& run);

// Note [The compile jail]: a submission compiles as the sandbox (never as the grader's user) in a
// folder of its own, made fresh for each grading: `work` holds a copy of the student's files,
// the objects and the binaries, and nothing of an earlier submission. The compile reads the
// instructor's build only (read-only: the library, the drivers' objects, the precompiled
// header), so grading changes nothing there.
// - bwrap: a sandbox with no network whose file system holds /usr, /etc, `visible` read-only and
//   `work` writable, and nothing else of the machine (submission.cpp makes `visible` the kit's
//   library and the drivers' objects): the compile cannot read solutions/, what they built, or
//   any grading's results. As root it runs as a uid of its own.
// - user: as a uid of its own (the grader must be root), which sees what file permissions let
//   it: check_command refuses a submission in this mode while the answers are readable by it
//   (answers_readable_by_sandbox).
// - none: as the grader's user.
// Every process of it gets CompileLimits' rlimits and a new session; its output is kept to its last part.
struct CompileJail {
  std::vector<std::filesystem::path> visible;
  std::filesystem::path work;   // the compile's own folder (cwd), removed by the destructor
  bool as_other_uid = false;
  uid_t uid = 0;
  gid_t gid = 0;
  CompileJail() = default;
  CompileJail(const CompileJail&) = delete;
  CompileJail& operator=(const CompileJail&) = delete;
  ~CompileJail();
};

// Makes jail->work (/tmp/dtlab-build-XXXXXX) and picks the uid the compile runs as.
void open_compile_jail(const Sandbox& sandbox, CompileJail* jail);
// Gives everything under jail.work to the compile's uid (after the grader copied files in).
void hand_to_compile(const CompileJail& jail);

struct CompileResult {
  int exit_code = -1;
  bool timed_out = false;
  std::string output;   // stdout and stderr; past CompileLimits::output_bytes, its last part
};
// Runs argv (the compiler, a link) inside the jail, in jail.work; throws dtlab::Error when it
// cannot start. A compile that a limit stopped says so in its output, naming the limits
// (compile_limits_text).
CompileResult run_compile(const Sandbox& sandbox, const CompileJail& jail, const std::vector<std::string>& argv);
// "600 s of CPU time and 8 GiB of address space per process, files of 256 MiB, ...".
std::string compile_limits_text(const CompileLimits& limits);

// User mode: the answers of the kit (solutions/, tests/mutants/, build/*-solution, the build's
// tests and benchmarks) that the sandbox's uid can read or run here, found by trying as that uid;
// empty when none (or in another mode). A submission graded in user mode with any of them
// readable could #include or run them.
std::vector<std::filesystem::path> answers_readable_by_sandbox(const Sandbox& sandbox,
                                                               const std::filesystem::path& source_dir,
                                                               const std::filesystem::path& build_dir);

}  // namespace dtlab::grader
