// Tasks 2a, 2b and 3 on four "hosts": network namespaces made by scripts/netns_hosts.sh, each
// with its own eth0 on 10.213.0.0/24, so the rendezvous and Gloo go over real (virtual) links
// between addresses other than loopback, as on a cluster. The losses must be task 1's, as on
// one host (see data_parallel_test.cpp for why).
//
// Needs root and iproute2's `ip` with network namespaces; otherwise each test is reported as
// skipped with the reason.
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dtlab/tooling/process.h"
#include "dtlab/io/json_file.h"
#include "dtlab/train/runtime.h"
#include "process_test_util.h"
#include "test_util.h"

namespace fs = std::filesystem;
using dtlab::ProcessResult;
using dtlab::run_process;
using dtlab::test::Child;
using dtlab::test::ChildExit;
using dtlab::test::iteration_losses;

namespace {

constexpr int kHosts = 4;
constexpr int kSteps = 6;
constexpr double kTolerance = 1e-5;
constexpr int kScriptTimeoutSeconds = 300;  // netns_hosts.sh kills the ranks after this
// Our own prefix, so `netns_hosts.sh down` of someone else's default prefix never removes our
// hosts, and ours never theirs. Interface names like dte2e-br0 fit in 15 characters.
constexpr const char* kPrefix = "dte2e";
const std::string kScript = std::string(DTLAB_SOURCE_DIR) + "/scripts/netns_hosts.sh";

// Why the namespace run cannot happen here, or "" when it can.
std::string why_no_namespaces() {
  if (::geteuid() != 0) return "not running as root (network namespaces need root; run the suite with sudo)";
  ProcessResult r;
  try {
    r = run_process({"ip", "netns", "list"}, 30);
  } catch (const std::exception& e) {
    return std::string("iproute2's `ip` is not available: ") + e.what();
  }
  if (r.exit_code != 0) return "`ip netns list` failed (exit " + std::to_string(r.exit_code) + "): " + r.output;
  return "";
}

// One test at a time makes namespaces from this suite, also across build folders and ctest -j:
// an exclusive lock held for the whole test (released by the kernel if the test dies).
class HostLock {
 public:
  HostLock() {
    fd_ = ::open("/tmp/dtlab-e2e-multihost.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~HostLock() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  int fd_ = -1;
};

class MultiHost : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = why_no_namespaces();
    if (!why.empty()) GTEST_SKIP() << why;
    lock_ = std::make_unique<HostLock>();
    // Leftovers of an earlier, killed run of this suite would stop `up`.
    const ProcessResult down = run_process({kScript, "down", "--prefix", kPrefix}, 120);
    ASSERT_EQ(down.exit_code, 0) << down.output;
    dir_ = dtlab::test::fresh_temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    const ProcessResult r = run_process({DTLAB_PROGRAM("dtlab-fixtures"), "--out", (dir_ / "fx").string()}, 60);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }

  void TearDown() override {
    // Whatever happened, no namespace of ours is left behind.
    if (lock_) {
      const ProcessResult down = run_process({kScript, "down", "--prefix", kPrefix}, 120);
      EXPECT_EQ(down.exit_code, 0) << down.output;
    }
  }

  std::vector<std::string> flags(const std::string& binary, const std::string& out) const {
    return {binary, "--model_name_or_path", (dir_ / "fx/bert-tiny").string(), "--data_dir",
            (dir_ / "fx/RTE").string(), "--do_train", "--do_eval", "--max_seq_length", "32",
            "--learning_rate", "3e-4", "--num_train_epochs", "1", "--max_steps", std::to_string(kSteps),
            "--dropout", "0", "--seed", "42", "--threads", "1", "--no_save", "--overwrite_output_dir",
            "--output_dir", out};
  }

  std::vector<double> task1_losses() {
    const fs::path out = dir_ / "task1";
    std::vector<std::string> args = flags(DTLAB_PROGRAM("task1-solution"), out.string());
    args.insert(args.end(), {"--per_gpu_train_batch_size", "32"});
    const ProcessResult r = run_process(args, 600);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.exit_code == 0 ? iteration_losses(dtlab::io::read_json_file(out / "results.json"))
                            : std::vector<double>{};
  }

  // Runs `binary` on kHosts namespace hosts with netns_hosts.sh and returns its exit and output.
  // Another person's hosts on the same subnet make the script refuse to start: then wait and
  // try again, for a while.
  ChildExit run_on_hosts(const std::string& binary) {
    std::vector<std::string> argv = {kScript, "run", std::to_string(kHosts), "--prefix", kPrefix,
                                     "--logs", (dir_ / "logs").string(), "--timeout",
                                     std::to_string(kScriptTimeoutSeconds), "--"};
    // The master port lives in the namespaces' own port space: no other program uses it.
    std::vector<std::string> run = flags(binary, (dir_ / "out{rank}").string());
    // No --threads: the ranks must find that the four hosts share this machine's cores.
    const auto threads = std::find(run.begin(), run.end(), "--threads");
    run.erase(threads, threads + 2);
    run.insert(run.end(), {"--global_batch_size", "32", "--master_ip", "{master}", "--master_port", "29500",
                           "--world_size", "{world}", "--local_rank", "{rank}", "--timeout", "120"});
    argv.insert(argv.end(), run.begin(), run.end());

    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    for (int attempt = 1;; ++attempt) {
      const fs::path log = dir_ / ("netns_hosts-" + std::to_string(attempt) + ".log");
      ChildExit e;
      {
        Child script(argv, log);
        // The script's own timeout comes first; SIGTERM then lets its trap tear down.
        e = script.wait_until(std::chrono::steady_clock::now() + std::chrono::seconds(kScriptTimeoutSeconds + 60),
                              /*grace_seconds=*/30);
      }
      const bool busy = e.exit_code == 1 && e.output.find("logs:") == std::string::npos &&
                        e.output.find("already in use here") != std::string::npos;
      if (!busy || std::chrono::steady_clock::now() > give_up) return e;
      std::printf("subnet busy (someone else's namespace hosts), retrying in 10 s (attempt %d)\n", attempt);
      std::this_thread::sleep_for(std::chrono::seconds(10));
    }
  }

  void expect_matches_task1(const std::string& binary) {
    const std::vector<double> want = task1_losses();
    ASSERT_EQ(want.size(), static_cast<size_t>(kSteps));
    const auto start = std::chrono::steady_clock::now();
    const ChildExit e = run_on_hosts(binary);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string logs;
    for (int r = 0; r < kHosts; ++r) {
      logs += "--- rank " + std::to_string(r) + ":\n" +
              dtlab::test::read_text(dir_ / "logs" / ("rank" + std::to_string(r) + ".log"));
    }
    ASSERT_EQ(e.exit_code, 0) << e.describe() << logs;
    std::printf("%d hosts: %.1f s\n", kHosts, seconds);

    // Only rank 0 writes results.
    for (int r = 1; r < kHosts; ++r) {
      EXPECT_FALSE(fs::exists(dir_ / ("out" + std::to_string(r)) / "results.json")) << "rank " << r;
    }
    const nlohmann::json results = dtlab::io::read_json_file(dir_ / "out0" / "results.json");
    const auto& env = results.at("environment");
    EXPECT_EQ(env.at("world_size").get<int>(), kHosts);
    EXPECT_EQ(env.at("backend").get<std::string>(), "gloo");
    // The namespaces share this machine's host name but not an address: four hosts of one rank.
    EXPECT_EQ(env.at("ranks_on_this_host").get<int>(), 1);
    // ... but one machine: its cores are shared four ways (one kernel, one boot id).
    EXPECT_EQ(env.at("ranks_on_this_machine").get<int>(), kHosts);
    EXPECT_EQ(env.at("threads").get<int>(), std::max(1, dtlab::train::available_cores() / kHosts));
    EXPECT_NE(logs.find("1 on this host, 4 sharing this machine's cores"), std::string::npos) << logs;
    EXPECT_EQ(results.at("config").at("per_rank_train_batch_size").get<int>(), 32 / kHosts);
    EXPECT_NE(logs.find("master 10.213.0.10:29500"), std::string::npos) << logs;

    const std::vector<double> got = iteration_losses(results);
    ASSERT_EQ(got.size(), static_cast<size_t>(kSteps));
    double worst = 0;
    for (int i = 0; i < kSteps; ++i) {
      EXPECT_NEAR(got[i], want[i], kTolerance) << "step " << i + 1;
      worst = std::max(worst, std::fabs(got[i] - want[i]));
    }
    std::printf("max |loss - task1 loss| = %.3g over %d steps\n", worst, kSteps);
    // The dev set is split over the hosts and the counts summed: every example once.
    EXPECT_EQ(results.at("epochs").back().at("eval_examples").get<int>(), 277);
  }

  std::unique_ptr<HostLock> lock_;  // held from SetUp to the end of TearDown
  fs::path dir_;
};

TEST_F(MultiHost, Task2aOnFourHostsMatchesTask1) { expect_matches_task1(DTLAB_PROGRAM("task2a-solution")); }
TEST_F(MultiHost, Task2bOnFourHostsMatchesTask1) { expect_matches_task1(DTLAB_PROGRAM("task2b-solution")); }
TEST_F(MultiHost, Task3OnFourHostsMatchesTask1) { expect_matches_task1(DTLAB_PROGRAM("task3-solution")); }

}  // namespace
