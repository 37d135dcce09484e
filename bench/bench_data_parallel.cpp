// bench_data_parallel: seconds per training step of the data-parallel exercises (the reference
// solutions task2a-solution, task2b-solution, task3-solution) for several world sizes, and the
// DistributedDataParallel bucket-cap sweep of task 3, by running the real binaries as local
// processes on loopback (127.0.0.1), the way a student runs them.
//
// Every run: fresh fixtures (dtlab-fixtures: the tiny L2/H128 BERT and the RTE-format data),
// one process per rank started in parallel, a free port for the rendezvous, --max_steps steps of
// a fixed global batch (so the work per step is the same whatever the world size), no
// evaluation, no saving. The figures come from rank 0's results.json: the driver times each
// step on rank 0, discards the first and averages the rest (report::summarize), and records per
// step the seconds spent synchronising gradients ("comm_seconds").
//
// On one machine the ranks share its cores: the table shows what synchronisation costs, not how
// training scales. Real scaling needs several machines.
#include <CLI/CLI.hpp>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/tooling/build_paths.h"
#include "dtlab/tooling/process.h"
#include "dtlab/dist/ddp.h"
#include "dtlab/io/json_file.h"
#include "dtlab/report/timing.h"
#include "dtlab/train/runtime.h"


namespace fs = std::filesystem;

namespace {

using namespace dtlab;

// The table of exercises (exercises.txt): name, launch, kind, title.
struct TableRow {
  std::string name, launch, kind, title;
};
const std::vector<TableRow> kTable = {
#include "exercise_table.inc"
};

// The exercises this bench times: the data-parallel ones whose gradients are synchronised by
// hand or by DDP (kinds sync and ddp), with the reference binaries CMake built.
std::vector<std::string> timed_exercises() {
  std::vector<std::string> names;
  for (const auto& row : kTable) {
    if (row.kind == "sync" || row.kind == "ddp") names.push_back(row.name);
  }
  return names;
}

std::string solution_binary(const std::string& name) {
  return (fs::path(DTLAB_BUILD_DIR) / (name + "-solution")).string();
}

std::string describe_exercise(const std::string& name) {
  for (const auto& row : kTable) {
    if (row.name == name) return row.title;
  }
  return name;
}

// The exercise whose bucket cap the sweep varies: the first of kind ddp.
std::string ddp_exercise() {
  for (const auto& row : kTable) {
    if (row.kind == "ddp") return row.name;
  }
  throw Error("exercises.txt has no exercise of kind ddp for the bucket-cap sweep");
}

struct Options {
  std::vector<std::string> exercises = timed_exercises();
  std::vector<int> worlds = {1, 2, 4};
  std::vector<double> caps = {0.25, 1, 5, 25, 100};
  // 2 ranks by default: on a 2-core machine 4 ranks oversubscribe the cores and the bucket
  // waits would mostly measure the scheduler, not the buckets (see the header it prints).
  int sweep_world = 2;
  bool skip_sweep = false;
  long max_steps = static_cast<long>(report::kTimedIterations);
  int seq = 128;
  int global_batch = 32;
  int threads = 0;            // per rank; 0: max(1, cores / world)
  double run_timeout = 600;   // seconds before every rank of a run is killed
  double rank_timeout = 120;  // the ranks' own --timeout (rendezvous, every collective)
  std::string fixtures;       // reuse this fixtures folder instead of generating one
  bool keep = false;
  std::string json;
};

int threads_per_rank(const Options& o, int world) {
  return o.threads > 0 ? o.threads : std::max(1, train::available_cores() / world);
}

// describe_runtime() without its thread count: that one is this process's, which computes
// nothing; the ranks' counts are printed on their own line.
std::string runtime_without_threads() {
  std::string s = train::describe_runtime();
  const size_t at = s.find(" | threads ");
  if (at != std::string::npos) {
    const size_t end = s.find(" | ", at + 3);
    s.erase(at, end == std::string::npos ? std::string::npos : end - at);
  }
  return s;
}

std::string tail(const std::string& text, size_t lines) {
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  size_t found = 0;
  while (pos > 0) {
    const size_t nl = text.rfind('\n', pos - 1);
    if (nl == std::string::npos) {
      pos = 0;
      break;
    }
    if (++found == lines) {
      pos = nl + 1;
      break;
    }
    pos = nl;
  }
  return text.substr(pos);
}

std::string indent(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) out += prefix + line + "\n";
  return out;
}

std::string status_text(const ProcessResult& p) {
  if (p.timed_out) return "timed out";
  if (p.signal) return fmt::format("killed by signal {}", p.signal);
  return fmt::format("exit {}", p.exit_code);
}

std::string join(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

struct Run {
  std::string exercise;
  int world = 1;
  int threads = 1;
  std::optional<double> cap_mb;
  bool ok = false;
  std::string failure;            // why not ok: "rank 1 exit 4", "no results.json", ...
  std::vector<std::string> command;  // rank 0's
  double wall = 0;                // seconds from launch to the last rank's exit
  // From rank 0's results.json.
  nlohmann::json timing;
  int64_t buckets = -1;  // DDP buckets (task 3)
  int64_t bucket_bytes = 0;
  int rank_threads = 0;  // what the ranks report ("environment"."threads")

  double mean() const { return timing.value("mean_seconds", 0.0); }
  double stdev() const { return timing.value("stdev_seconds", 0.0); }
  double comm() const { return timing.value("mean_comm_seconds", 0.0); }
  double tokens() const { return timing.value("tokens_per_second", 0.0); }
};

class Bench {
 public:
  Bench(const Options& o, fs::path fixtures, fs::path work)
      : o_(o), fixtures_(std::move(fixtures)), work_(std::move(work)) {}

  // Runs exercise on world ranks; prints the failing ranks' output tails.
  Run run(const std::string& exercise, int world, std::optional<double> cap_mb) {
    Run r;
    r.exercise = exercise;
    r.world = world;
    r.cap_mb = cap_mb;
    r.threads = threads_per_rank(o_, world);
    const fs::path out = work_ / fmt::format("{}-w{}{}-{}", exercise, world,
                                             cap_mb ? fmt::format("-cap{:g}", *cap_mb) : "", ++runs_);
    for (int attempt = 1;; ++attempt) {
      const bool retry = attempt < 2;
      if (run_once(r, out, retry)) break;
    }
    return r;
  }

 private:
  std::vector<std::string> command(const std::string& exercise, int world, int rank, int port,
                                   int threads, std::optional<double> cap_mb, const fs::path& out) const {
    std::vector<std::string> argv = {
        solution_binary(exercise),
        "--model_name_or_path", (fixtures_ / "bert-tiny").string(),
        "--data_dir", (fixtures_ / "RTE").string(),
        "--do_train",
        "--max_seq_length", std::to_string(o_.seq),
        "--global_batch_size", std::to_string(o_.global_batch),
        "--learning_rate", "3e-4",
        "--num_train_epochs", "1",
        "--max_steps", std::to_string(o_.max_steps),
        "--dropout", "0",
        "--threads", std::to_string(threads),
        "--log_first_steps", "0",  // no extra loss all_reduce between the timed steps
        "--no_save",
        "--overwrite_output_dir",
        "--master_ip", "127.0.0.1",
        "--master_port", std::to_string(port),
        "--world_size", std::to_string(world),
        "--local_rank", std::to_string(rank),
        "--timeout", fmt::format("{:g}", o_.rank_timeout),
        "--output_dir", out.string()};
    if (cap_mb) {
      argv.push_back("--bucket_cap_mb");
      argv.push_back(fmt::format("{:g}", *cap_mb));
    }
    return argv;
  }

  // One attempt; false when it should be retried (the port was taken before rank 0 bound it).
  bool run_once(Run& r, const fs::path& out, bool may_retry) {
    const int port = free_local_port();  // run_once retries once if another process takes it first
    fs::remove_all(out);
    fs::create_directories(out);
    std::vector<ProcessResult> results(r.world);
    std::vector<std::string> start_errors(r.world);
    std::vector<std::thread> ranks;
    r.command = command(r.exercise, r.world, 0, port, r.threads, r.cap_mb, out);
    report::Stopwatch wall;
    for (int rank = 0; rank < r.world; ++rank) {
      auto argv = command(r.exercise, r.world, rank, port, r.threads, r.cap_mb, out);
      ranks.emplace_back([&, rank, argv = std::move(argv)] {
        try {
          results[rank] = run_process(argv, o_.run_timeout);
        } catch (const std::exception& e) {
          start_errors[rank] = e.what();
        }
      });
    }
    for (auto& t : ranks) t.join();
    r.wall = wall.seconds();

    std::vector<int> failed;
    for (int rank = 0; rank < r.world; ++rank) {
      if (!start_errors[rank].empty() || results[rank].exit_code != 0) failed.push_back(rank);
    }
    if (!failed.empty()) {
      bool port_taken = false;
      for (int rank : failed) {
        port_taken |= results[rank].output.find("Address already in use") != std::string::npos;
      }
      if (port_taken && may_retry) {
        fmt::print("  ({} world {}: port {} was taken, retrying on another)\n", r.exercise, r.world, port);
        return false;
      }
      std::vector<std::string> what;
      for (int rank : failed) {
        what.push_back(fmt::format("rank {} {}", rank,
                                   start_errors[rank].empty() ? status_text(results[rank]) : "not started"));
      }
      r.failure = what.front();
      for (size_t i = 1; i < what.size(); ++i) r.failure += ", " + what[i];
      fmt::print("  {} world {}{}: FAILED ({}); command of rank 0:\n    {}\n", r.exercise, r.world,
                 r.cap_mb ? fmt::format(" cap {:g} MB", *r.cap_mb) : "", r.failure, join(r.command));
      for (int rank : failed) {
        if (!start_errors[rank].empty()) {
          fmt::print("  rank {}: {}\n", rank, start_errors[rank]);
        } else {
          fmt::print("  rank {} ({}), last lines of its output:\n{}", rank, status_text(results[rank]),
                     indent(tail(results[rank].output, 12), "    | "));
        }
      }
      std::fflush(stdout);
      return true;
    }

    const fs::path results_path = out / "results.json";
    try {
      const nlohmann::json j = io::read_json_file(results_path);
      r.timing = j.at("timing");
      r.rank_threads = j.at("environment").value("threads", 0);
      if (j.contains("communication") && j["communication"].contains("ddp_buckets")) {
        const auto& b = j["communication"]["ddp_buckets"];
        r.buckets = static_cast<int64_t>(b.size());
        for (const auto& bucket : b) r.bucket_bytes += bucket.value("bytes", int64_t{0});
      }
      if (r.timing.value("count", 0) < 1) throw Error("no timed iterations in " + results_path.string());
      r.ok = true;
    } catch (const std::exception& e) {
      r.failure = e.what();
      fmt::print("  {} world {}: FAILED: {}\n  rank 0's last lines:\n{}", r.exercise, r.world, r.failure,
                 indent(tail(results[0].output, 12), "    | "));
    }
    std::fflush(stdout);
    return true;
  }

  const Options& o_;
  fs::path fixtures_, work_;
  int runs_ = 0;
};

// A temporary folder, removed at exit unless kept.
class WorkDir {
 public:
  explicit WorkDir(bool keep) : keep_(keep) {
    std::string pattern = (fs::temp_directory_path() / "bench_data_parallel.XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw Error(std::string("mkdtemp: ") + std::strerror(errno));
    path_ = pattern;
  }
  ~WorkDir() {
    if (keep_) return;
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  bool keep_;
};

constexpr const char* kTableFormat = "{:<8} {:>5} {:>7} {:>9} {:>8} {:>11} {:>6} {:>10} {:>8}\n";

void print_table_header() {
  fmt::print(kTableFormat, "exercise", "world", "thr/rk", "s/iter", "±stdev", "comm s/iter", "comm%",
             "tokens/s", "speedup");
}

void print_row(const Run& r, const Run* base) {
  if (!r.ok) {
    fmt::print("{:<8} {:>5} {:>7}   failed: {}\n", r.exercise, r.world, r.threads, r.failure);
  } else {
    const std::string speedup =
        base && base->ok ? fmt::format("{:.2f}x", base->mean() / r.mean()) : std::string("-");
    fmt::print(kTableFormat, r.exercise, r.world, r.threads, fmt::format("{:.4f}", r.mean()),
               fmt::format("{:.4f}", r.stdev()), fmt::format("{:.4f}", r.comm()),
               fmt::format("{:.1f}", 100.0 * r.comm() / r.mean()), fmt::format("{:.0f}", r.tokens()),
               speedup);
  }
  std::fflush(stdout);
}

constexpr const char* kSweepFormat = "{:>9} {:>8} {:>9} {:>8} {:>11} {:>6} {:>10}\n";

void print_sweep_row(const Run& r) {
  const std::string cap = fmt::format("{:g}", *r.cap_mb);
  if (!r.ok) {
    fmt::print("{:>9}   failed: {}\n", cap, r.failure);
  } else {
    fmt::print(kSweepFormat, cap, r.buckets, fmt::format("{:.4f}", r.mean()), fmt::format("{:.4f}", r.stdev()),
               fmt::format("{:.4f}", r.comm()), fmt::format("{:.1f}", 100.0 * r.comm() / r.mean()),
               fmt::format("{:.0f}", r.tokens()));
  }
  std::fflush(stdout);
}

nlohmann::json run_json(const Run& r) {
  nlohmann::json j = {{"exercise", r.exercise},       {"world_size", r.world},
                      {"threads_per_rank", r.threads}, {"ok", r.ok},
                      {"wall_seconds", r.wall},        {"command_rank0", r.command}};
  if (r.cap_mb) j["bucket_cap_mb"] = *r.cap_mb;
  if (!r.ok) {
    j["failure"] = r.failure;
    return j;
  }
  j["timing"] = r.timing;
  j["comm_share"] = r.comm() / r.mean();
  j["ranks_report_threads"] = r.rank_threads;
  if (r.buckets >= 0) {
    j["ddp_buckets"] = r.buckets;
    j["ddp_bucket_bytes"] = r.bucket_bytes;
  }
  return j;
}

std::string load_average() {
  double load[3];
  if (getloadavg(load, 3) != 3) return "unknown";
  return fmt::format("{:.2f} {:.2f} {:.2f}", load[0], load[1], load[2]);
}

int run(Options o) {
  if (o.max_steps <= static_cast<long>(report::kDiscardedIterations)) {
    throw Error(fmt::format("--max_steps must be at least {}: the first step is discarded",
                            report::kDiscardedIterations + 1));
  }
  if (o.seq < 1 || o.seq > 512) throw Error("--seq must be between 1 and 512 (max_position_embeddings)");
  if (o.global_batch < 1) throw Error("--global_batch must be at least 1");
  std::sort(o.worlds.begin(), o.worlds.end());
  o.worlds.erase(std::unique(o.worlds.begin(), o.worlds.end()), o.worlds.end());
  for (int w : o.worlds) {
    if (w < 1) throw Error(fmt::format("--worlds: {} is not a world size", w));
    if (o.global_batch % w) {
      throw Error(fmt::format("--global_batch {} is not divisible by world size {}", o.global_batch, w));
    }
  }
  if (!o.skip_sweep && o.global_batch % o.sweep_world) {
    throw Error(fmt::format("--global_batch {} is not divisible by --world {}", o.global_batch, o.sweep_world));
  }
  for (double c : o.caps) {
    if (!(c > 0)) throw Error(fmt::format("--caps: {:g} is not a positive size in MB", c));
  }

  report::Stopwatch total;
  const int cores = train::available_cores();
  const std::string load_start = load_average();
  WorkDir work(o.keep);

  // Fixtures: generated afresh unless a folder is given.
  fs::path fixtures = o.fixtures;
  if (!fixtures.empty()) {
    for (const char* sub : {"bert-tiny", "RTE"}) {
      if (!fs::is_directory(fixtures / sub)) {
        throw Error("--fixtures " + o.fixtures + " has no " + sub + "/: give a folder dtlab-fixtures --out wrote");
      }
    }
  } else {
    fixtures = work.path() / "fixtures";
    const std::vector<std::string> argv = {DTLAB_PROGRAM("dtlab-fixtures"), "--out", fixtures.string()};
    const ProcessResult p = run_process(argv, 300);
    if (p.exit_code != 0) {
      throw Error(fmt::format("{} failed ({}):\n{}", join(argv), status_text(p), tail(p.output, 12)));
    }
  }

  const size_t timed = std::min<size_t>(static_cast<size_t>(o.max_steps), report::kTimedIterations) -
                       report::kDiscardedIterations;
  fmt::print("bench_data_parallel: seconds per training step of the data-parallel exercises, run as "
             "local processes on 127.0.0.1\n");
  fmt::print("  runtime   {} (the ranks load the same libraries)\n", runtime_without_threads());
  fmt::print("  machine   {} cores available, load average {} at start{}\n", cores, load_start,
             " (shared machine: other work competes for the cores)");
  if (o.threads > 0) {
    fmt::print("  threads   per rank {} (--threads):", o.threads);
  } else {
    fmt::print("  threads   per rank max(1, {} cores / world):", cores);
  }
  for (int w : o.worlds) fmt::print(" world {} -> {}", w, threads_per_rank(o, w));
  fmt::print("\n");
  fmt::print("  model     fixtures tiny BERT L2/H128/A2 ({}), RTE-format data, dropout 0, no evaluation\n",
             o.fixtures.empty() ? "generated by dtlab-fixtures" : o.fixtures);
  fmt::print("  work      global batch {} fixed (global/world per rank), seq {}, --max_steps {}: "
             "first step discarded, mean of {}\n",
             o.global_batch, o.seq, o.max_steps, timed);
  for (const auto& e : o.exercises) fmt::print("  {:<8}  {}-solution: {}\n", e, e, describe_exercise(e));
  fmt::print("  figures   rank 0's results.json; comm = seconds synchronising gradients per step "
             "(task3: waiting for buckets after backward)\n\n");
  print_table_header();
  std::fflush(stdout);

  Bench bench(o, fixtures, work.path());
  std::vector<Run> runs;
  for (const auto& exercise : o.exercises) {
    std::optional<size_t> base;
    for (int world : o.worlds) {
      runs.push_back(bench.run(exercise, world, std::nullopt));
      if (world == 1) base = runs.size() - 1;
      print_row(runs.back(), base ? &runs[*base] : nullptr);
    }
  }
  fmt::print("speedup: s/iter at world 1 / s/iter, same exercise. tokens/s: non-padding tokens of "
             "the global batch per second (the driver's count).\n");

  std::vector<Run> sweep;
  if (!o.skip_sweep && !o.caps.empty()) {
    fmt::print("\nDDP bucket-cap sweep: task3-solution at world {}, {} thread{} per rank (--world; "
               "default 2: on 2 cores, 4 ranks oversubscribe\n  the cores and the waits for buckets "
               "would mostly measure descheduled peers, not the bucket size)\n\n",
               o.sweep_world, threads_per_rank(o, o.sweep_world), threads_per_rank(o, o.sweep_world) > 1 ? "s" : "");
    fmt::print(kSweepFormat, "cap MB", "buckets", "s/iter", "±stdev", "comm s/iter", "comm%", "tokens/s");
    std::fflush(stdout);
    for (double cap : o.caps) {
      sweep.push_back(bench.run(ddp_exercise(), o.sweep_world, cap));
      print_sweep_row(sweep.back());
    }
    for (const Run& r : sweep) {
      if (r.ok && r.bucket_bytes > 0) {
        fmt::print("gradients: {:.2f} MB in all buckets. The first bucket is capped at {:g} MB "
                   "whatever the cap (as in PyTorch),\n  so caps above the rest ({:.2f} MB) give "
                   "the same buckets. comm: the wait after backward for buckets still in flight.\n",
                   r.bucket_bytes / 1048576.0, dist::kFirstBucketBytes / 1048576.0,
                   std::max<int64_t>(0, r.bucket_bytes - dist::kFirstBucketBytes) / 1048576.0);
        break;
      }
    }
  }

  const double wall = total.seconds();
  fmt::print("\nnote: these ranks share one machine's {} cores, so the figures show synchronisation "
             "overheads (and\n  contention), not real scaling: adding ranks here adds no compute. "
             "Real scaling needs several machines;\n  scripts/netns_hosts.sh with --rate emulates "
             "their network links, but the ranks still share this CPU.\n"
             "  A rank with several threads suffers most when other processes hold a core: its "
             "OpenMP threads wait\n  for a descheduled sibling at every parallel region (compare "
             "the load averages; --threads 1 pins it).\n",
             cores);
  fmt::print("total wall time {:.1f} s, load average at the end {}\n", wall, load_average());

  if (!o.json.empty()) {
    nlohmann::json table = nlohmann::json::array(), caps = nlohmann::json::array();
    for (const Run& r : runs) table.push_back(run_json(r));
    for (const Run& r : sweep) caps.push_back(run_json(r));
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    const train::BlasInfo blas = train::detect_blas();
    const nlohmann::json j = {
        {"benchmark", "bench_data_parallel"},
        {"environment",
         {{"hostname", host}, {"libtorch", TORCH_VERSION}, {"blas", blas.name},
          {"blas_library", blas.path}, {"cores", cores}, {"load_average_start", load_start},
          {"load_average_end", load_average()}}},
        {"settings",
         {{"exercises", o.exercises}, {"worlds", o.worlds}, {"caps_mb", o.caps},
          {"sweep_world", o.sweep_world}, {"max_steps", o.max_steps}, {"seq", o.seq},
          {"global_batch", o.global_batch}, {"discarded_iterations", report::kDiscardedIterations},
          {"threads_per_rank", o.threads > 0 ? nlohmann::json(o.threads) : nlohmann::json("max(1, cores / world)")}, {"learning_rate", 3e-4}, {"dropout", 0.0}}},
        {"runs", table},
        {"bucket_cap_sweep", caps},
        {"wall_seconds", wall}};
    if (o.json == "-") {
      fmt::print("{}\n", j.dump());
    } else {
      io::write_json_file(o.json, j);
      fmt::print("json: {}\n", o.json);
    }
  }
  if (o.keep) fmt::print("kept: {}\n", work.path().string());
  size_t failed = 0;
  for (const Run& r : runs) failed += !r.ok;
  for (const Run& r : sweep) failed += !r.ok;
  if (failed) {
    fmt::print("{} of {} runs failed (their rank output is above)\n", failed, runs.size() + sweep.size());
    return kExitInternal;
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  return dtlab::run_main("bench_data_parallel", [&]() -> int {
    Options o;
    CLI::App app{"Times the data-parallel exercises (task2a, task2b, task3 reference solutions) for "
                 "several world sizes, and task 3's DDP bucket cap, as local processes on 127.0.0.1. A failed "
                 "run is reported and the next one started; the exit status is 1 if any failed"};
    app.add_option("--exercises", o.exercises, "Comma-separated subset of task2a,task2b,task3")
        ->delimiter(',')
        ->check(CLI::IsMember(timed_exercises()))
        ->capture_default_str();
    app.add_option("--worlds", o.worlds, "Comma-separated world sizes (ranks)")
        ->delimiter(',')
        ->capture_default_str();
    app.add_option("--caps", o.caps, "Comma-separated DDP bucket caps in MB for the task 3 sweep")
        ->delimiter(',')
        ->capture_default_str();
    app.add_option("--world", o.sweep_world,
                   "Ranks of the bucket-cap sweep (2: one core each on 2 cores; 4 oversubscribes)")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    app.add_flag("--skip_sweep", o.skip_sweep, "Skip the bucket-cap sweep");
    app.add_option("--max_steps", o.max_steps,
                   "Steps per run; the first is discarded, at most 39 more are averaged")
        ->capture_default_str();
    app.add_option("--seq", o.seq, "--max_seq_length of every run")->capture_default_str();
    app.add_option("--global_batch", o.global_batch, "Examples per step over all ranks")
        ->capture_default_str();
    app.add_option("--threads", o.threads, "Threads per rank (0: max(1, cores / world))")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    app.add_option("--run_timeout", o.run_timeout, "Seconds before all ranks of a run are killed")
        ->capture_default_str();
    app.add_option("--rank_timeout", o.rank_timeout,
                   "The ranks' --timeout: seconds a rank waits for another")
        ->capture_default_str();
    app.add_option("--fixtures", o.fixtures,
                   "Use this dtlab-fixtures folder (bert-tiny/, RTE/) instead of generating one");
    app.add_flag("--keep", o.keep, "Keep the temporary folder (fixtures, each run's results.json)");
    app.add_option("--json", o.json, "Also write the figures as JSON to this file ('-': stdout)");
    if (auto stop = dtlab::parse_flags(app, argc, argv)) return *stop;
    return run(o);
  });
}
