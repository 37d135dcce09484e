// The grader's launcher and verdicts on runs that hang: Note [A run that stalls] (grader/launch.cpp)
// stops a run whose ranks all stopped making progress long before --run-timeout, and the hang
// verdict names every rank that hung, where its heartbeat says it was, without paths on the
// grading machine. The ranks here are shell scripts that write heartbeats in the kit's layout.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "dtlab/io/file.h"
#include "dtlab/tooling/build_paths.h"
#include "fork_ranks.h"
#include "launch.h"
#include "outcome.h"
#include "runs.h"
#include "test_util.h"

namespace fs = std::filesystem;
using dtlab::grader::diagnose;
using dtlab::grader::LaunchResult;
using dtlab::grader::LaunchSpec;
using dtlab::grader::RankBeat;
using dtlab::grader::RankExit;
using dtlab::grader::RunEvidence;
using dtlab::grader::Status;

namespace {

// Ranks that each run `script` under /bin/sh, their beats in dir/rank<r>.beat.
LaunchSpec sh_ranks(const fs::path& dir, int world, const std::string& script, double stall_floor) {
  LaunchSpec spec;
  spec.binary = "/bin/sh";
  spec.args = {"-c", script, "rank", "{rank}"};  // $1 is the rank
  spec.world_size = world;
  spec.log_dir = dir;
  spec.timeout_seconds = 60;
  spec.beat_file = (dir / "rank{rank}.beat").string();
  spec.stall_floor_seconds = stall_floor;
  spec.stall_factor = 4;
  return spec;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST(GraderStall, RanksThatAllStopMakingProgressAreStoppedAtTheBoundNotTheDeadline) {
  const fs::path dir = dtlab::test::fresh_temp_dir("stall-stopped");
  // Two operations, then every rank waits in code of its own, its beat frozen.
  const std::string script = "d=" + dir.string() +
                             "; printf '1\\n0\\n1\\n1\\n0\\nall_reduce #1 (gradients)' > $d/rank$1.beat; sleep 0.3; "
                             "printf '2\\n0\\n1\\n0\\n0\\nall_reduce #2 (gradients)' > $d/rank$1.beat; sleep 60";
  const auto start = std::chrono::steady_clock::now();
  const LaunchResult r = dtlab::grader::launch_ranks(sh_ranks(dir, 2, script, /*stall_floor=*/2));
  const double took = seconds_since(start);
  EXPECT_LT(took, 15) << "the run waited for its 60 s deadline";
  EXPECT_GE(r.stalled_seconds, 2);
  EXPECT_GE(r.stall_bound_seconds, 2);
  for (const RankExit& e : r.ranks) EXPECT_TRUE(e.killed) << "rank " << e.rank;
}

TEST(GraderStall, RanksThatKeepStartingOperationsAreNotStopped) {
  const fs::path dir = dtlab::test::fresh_temp_dir("stall-progress");
  // A new operation every 0.5 s for 5 s, more than three times the floor: progress all along.
  const std::string script = "d=" + dir.string() +
                             "; i=0; while [ $i -lt 10 ]; do i=$((i+1)); "
                             "printf \"$i\\n0\\n1\\n1\\n$i\\nall_reduce #$i (gradients)\" > $d/rank$1.beat; sleep 0.5; done";
  const LaunchResult r = dtlab::grader::launch_ranks(sh_ranks(dir, 2, script, /*stall_floor=*/1.5));
  EXPECT_TRUE(r.all_ok()) << "stopped after " << r.stalled_seconds << " s without progress";
  EXPECT_EQ(r.stalled_seconds, 0);
}

TEST(GraderStall, TheBoundGrowsWithTheLongestPauseSeen) {
  const fs::path dir = dtlab::test::fresh_temp_dir("stall-slow");
  // A pause of 1 s between two operations (under the floor of 2 s), then one of 3.5 s: over the
  // floor, under 8 x the first (the launcher sees the first as at least 0.75 s: it reads every
  // quarter second).
  const std::string script = "d=" + dir.string() +
                             "; printf '1\\n0\\n1\\n1\\n1\\nbroadcast #1' > $d/rank$1.beat; sleep 1; "
                             "printf '2\\n0\\n1\\n1\\n2\\nbroadcast #2' > $d/rank$1.beat; sleep 3.5";
  LaunchSpec spec = sh_ranks(dir, 1, script, /*stall_floor=*/2);
  spec.stall_factor = 8;
  const LaunchResult r = dtlab::grader::launch_ranks(spec);
  EXPECT_TRUE(r.all_ok()) << "stopped after " << r.stalled_seconds << " s, bound " << r.stall_bound_seconds << " s";
  // Without the first pause to scale it, the same silence is a stall.
  const std::string silent = "sleep 3.5";
  spec.args = {"-c", "d=" + dir.string() + "; printf '1\\n0\\n1\\n1\\n1\\nbroadcast #1' > $d/rank$1.beat; " + silent};
  const LaunchResult stalled = dtlab::grader::launch_ranks(spec);
  EXPECT_GT(stalled.stalled_seconds, 2) << "not stopped: the floor alone should bound it";
}

TEST(GraderStall, OnceARankHasEndedTheOthersMayFinishWithoutOperations) {
  const fs::path dir = dtlab::test::fresh_temp_dir("stall-finishing");
  // Rank 1 ends at once; rank 0 then works 3 s without an operation (evaluates, writes results).
  const std::string script = "d=" + dir.string() +
                             "; printf '1\\n0\\n1\\n0\\n1\\nall_reduce #9 (loss)' > $d/rank$1.beat; "
                             "if [ $1 = 0 ]; then sleep 3; fi";
  const LaunchResult r = dtlab::grader::launch_ranks(sh_ranks(dir, 2, script, /*stall_floor=*/1));
  EXPECT_TRUE(r.all_ok()) << "stopped after " << r.stalled_seconds << " s";
}

TEST(GraderStall, BeatsInTheKitsLayoutAreRead) {
  const auto b = dtlab::grader::parse_beat("7\n1700000000000\n3\n1\n1699999990000\nrecv #9 (activation 2)");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->count, 7);
  EXPECT_EQ(b->step, 3);
  EXPECT_EQ(b->in_flight, 1);
  EXPECT_EQ(b->unix_ms - b->operation_unix_ms, 10000);
  EXPECT_EQ(b->operation, "recv #9 (activation 2)");
  EXPECT_FALSE(dtlab::grader::parse_beat("7\n1700000000000\nthree\n").has_value());
}

namespace {

// Four ranks killed by the stall watch, each log holding only the start-up banner.
LaunchResult four_stalled_ranks(const fs::path& dir) {
  LaunchResult launch;
  for (int r = 0; r < 4; ++r) {
    RankExit e;
    e.rank = r;
    e.killed = true;
    e.seconds = 52;
    e.log = dir / ("rank" + std::to_string(r) + ".log");
    std::ofstream(e.log) << "task2b: 4 ranks, gloo, batch 8 per rank\n";
    launch.ranks.push_back(e);
  }
  launch.seconds = 52;
  launch.stalled_seconds = 36;
  launch.stall_bound_seconds = 35;
  return launch;
}

RankBeat beat(int64_t step, int64_t in_flight, double waited_seconds, const std::string& operation) {
  RankBeat b;
  b.count = 90;
  b.unix_ms = 1700000000000;
  b.step = step;
  b.in_flight = in_flight;
  b.operation_unix_ms = b.unix_ms - static_cast<int64_t>(waited_seconds * 1000);
  b.operation = operation;
  return b;
}

}  // namespace

TEST(GraderHangVerdict, NamesEveryRankThatHungAndWhereItWasWithoutPaths) {
  const fs::path dir = dtlab::test::fresh_temp_dir("hang-verdict");
  RunEvidence evidence;
  evidence.beats = {beat(2, 0, 36.4, "all_reduce #40 (gradients)"), beat(2, 0, 36.1, "all_reduce #40 (gradients)"),
                    beat(2, 1, 36.0, "all_reduce #41 (gradients)"), beat(1, 0, 40.0, "the rendezvous")};
  const auto v = diagnose(four_stalled_ranks(dir), "task2b at 4 ranks", evidence);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->status, Status::kHang);
  const std::string& m = v->message;
  EXPECT_NE(m.find("ranks 0, 1, 2 and 3 hung"), std::string::npos) << m;
  EXPECT_NE(m.find("for 36.0 s, past this run's bound of 35 s (the longest of --timeout + 5 s, 20 s and 4 times"),
            std::string::npos) << m;
  EXPECT_NE(m.find("rank 0: in step 2, in its own code: its last kit operation, all_reduce #40 (gradients), started "
                   "36.4 s before"), std::string::npos) << m;
  EXPECT_NE(m.find("rank 2: in step 2, waiting in all_reduce #41 (gradients) for 36.0 s"), std::string::npos) << m;
  EXPECT_NE(m.find("rank 3: in step 1, in its own code: it had run no kit operation yet"), std::string::npos) << m;
  // The banner says nothing of the hang, and a student cannot open the grading machine's files.
  EXPECT_EQ(m.find("batch 8 per rank"), std::string::npos) << m;
  EXPECT_EQ(m.find(dir.string()), std::string::npos) << m;
  EXPECT_EQ(m.find("rank 0 hung"), std::string::npos) << m;
}

TEST(GraderHangVerdict, RanksThatAllWaitInTheirOwnCodeAreToldWhyNoTimeoutFired) {
  const fs::path dir = dtlab::test::fresh_temp_dir("hang-own-code");
  RunEvidence evidence;
  for (int r = 0; r < 4; ++r) evidence.beats.push_back(beat(1, 0, 36, "broadcast #201 (initial buffers)"));
  const auto v = diagnose(four_stalled_ranks(dir), "task2b at 4 ranks", evidence);
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->message.find("No rank was waiting in a kit operation, so no collective could time out"),
            std::string::npos) << v->message;
}

TEST(GraderHangVerdict, WithoutHeartbeatsTheLogsAreQuotedByRankNotByPath) {
  const fs::path dir = dtlab::test::fresh_temp_dir("hang-no-beats");
  LaunchResult launch = four_stalled_ranks(dir);
  launch.stalled_seconds = 0;  // killed at --run-timeout
  const auto v = diagnose(launch, "task2b at 4 ranks", RunEvidence{});
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->message.find("ranks 0, 1, 2 and 3 hung: still running after 52 s"), std::string::npos) << v->message;
  EXPECT_NE(v->message.find("last lines of rank 3's log:"), std::string::npos) << v->message;
  EXPECT_EQ(v->message.find(dir.string()), std::string::npos) << v->message;
  // `grader run`'s user has the files: there the path helps.
  RunEvidence local;
  local.log_paths = true;
  EXPECT_NE(diagnose(launch, "task2b", local)->message.find(dir.string()), std::string::npos);
}

TEST(GraderHangVerdict, RanksThatAllTimedOutWaitingForEachOtherAreADeadlock) {
  const fs::path dir = dtlab::test::fresh_temp_dir("deadlock-verdict");
  LaunchResult launch;
  for (int r = 0; r < 2; ++r) {
    RankExit e;
    e.rank = r;
    e.exit_code = 4;  // a distributed error
    e.log = dir / ("rank" + std::to_string(r) + ".log");
    std::ofstream(e.log) << "pp: distributed error: rank " << r << ": send #3 (activation 1) failed: timed out after "
                         << "5 s. Every rank timed out together, each waiting for another: " << "this rank in send #3 "
                         << "(activation 1) (for 5.0 s); rank 1 in send #4 (gradient 0) (for 5.0 s): "
                         << dtlab::grader::kDeadlockWords << ". A blocking send waits until its peer receives\n";
    launch.ranks.push_back(e);
  }
  const auto v = diagnose(launch, "pp at 2 ranks");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->status, Status::kDeadlock) << v->message;
  EXPECT_STREQ(dtlab::grader::status_name(v->status), "deadlock");
  // One rank that says something else (it was behind): an error, as before.
  std::ofstream(launch.ranks[1].log) << "pp: distributed error: rank 1: recv #3 failed: timed out. The other ranks are "
                                        "still running\n";
  EXPECT_EQ(diagnose(launch, "pp at 2 ranks")->status, Status::kError);
}

// Note [What a grading keeps] (grader/runs.h): the dumps go, what feedback and report read stays.
TEST(GraderPrune, KeepsWhatFeedbackAndTheReportReadAndRemovesTheRest) {
  const fs::path runs = dtlab::test::fresh_temp_dir("prune") / "runs";
  const fs::path run = runs / "task2b-gradients-w4";
  const std::vector<std::string> kept = {"run.json", "sandbox.log", "rank0.log", "rank3.log", "rank1.beat",
                                         "output/results.json"};
  const std::vector<std::string> removed = {"dump/rank0.start.safetensors", "dump/rank0.step1.safetensors",
                                            "output/timeline.json", "output/model.safetensors"};
  for (const auto& name : kept) {
    fs::create_directories((run / name).parent_path());
    std::ofstream(run / name) << "kept";
  }
  for (const auto& name : removed) {
    fs::create_directories((run / name).parent_path());
    std::ofstream(run / name) << std::string(1000, 'x');
  }
  EXPECT_EQ(dtlab::grader::prune_runs(runs), 4000u);
  for (const auto& name : kept) EXPECT_TRUE(fs::exists(run / name)) << name;
  for (const auto& name : removed) EXPECT_FALSE(fs::exists(run / name)) << name;
  EXPECT_FALSE(fs::exists(run / "dump"));
  EXPECT_EQ(dtlab::grader::prune_runs(runs), 0u);
}

TEST(GraderHangVerdict, ARankTheOthersGaveUpOnIsNamedAloneWithTheirErrors) {
  const fs::path dir = dtlab::test::fresh_temp_dir("hang-one-rank");
  LaunchResult launch = four_stalled_ranks(dir);
  launch.stalled_seconds = 0;
  for (int r : {0, 2, 3}) {
    launch.ranks[r].killed = false;
    launch.ranks[r].exit_code = 4;
    std::ofstream(launch.ranks[r].log) << "task2b: distributed error: rank " << r << ": all_reduce #42 (gradients) "
                                       << "failed: timed out\n";
  }
  RunEvidence evidence;
  evidence.beats.resize(4);
  evidence.beats[1] = beat(1, 0, 16.6, "broadcast #41 (initial parameters)");
  const auto v = diagnose(launch, "task2b at 4 ranks", evidence);
  ASSERT_TRUE(v.has_value());
  const std::string& m = v->message;
  EXPECT_NE(m.find("task2b at 4 ranks: rank 1 hung: still running after 52 s, after the other ranks had given up"),
            std::string::npos) << m;
  EXPECT_NE(m.find("The other ranks gave up waiting for it"), std::string::npos) << m;
  EXPECT_NE(m.find("rank 2: exit code 4: task2b: distributed error: rank 2: all_reduce #42"), std::string::npos) << m;
  EXPECT_EQ(m.find("No rank was waiting"), std::string::npos) << m;
}

// Note [Ranks forked from one started program] (dtlab/tooling/fork_server.h).
namespace {

struct ProbeLine {
  int rank = -1;
  long started_as = 0, pid = 0, pgid = 0, ppid = 0;
  std::string server_env;
};

// What tests/fork_probe.cpp said in its log.
ProbeLine probe_line(const fs::path& log) {
  std::istringstream in(dtlab::io::read_file(log));
  ProbeLine p;
  std::string word;
  in >> word >> p.rank >> word >> p.started_as >> word >> p.pid >> word >> p.pgid >> word >> p.ppid >> word >>
      p.server_env;
  return p;
}

// fork_probe ranks: rank r exits with codes[r] after sleeping seconds[r]. Every rank takes the
// same words (the lists), as the ranks of a run do; the probe picks its own entry by its rank.
LaunchResult launch_probes(const fs::path& dir, const std::vector<int>& codes, const std::vector<double>& seconds,
                           bool fork_ranks, double timeout = 30) {
  std::string code_list, second_list;
  for (size_t r = 0; r < codes.size(); ++r) {
    code_list += (r ? "," : "") + std::to_string(codes[r]);
    second_list += (r ? "," : "") + std::to_string(seconds[r]);
  }
  LaunchSpec spec;
  spec.binary = DTLAB_PROGRAM("fork_probe");
  spec.args = {"{rank}", code_list, second_list};
  spec.world_size = static_cast<int>(codes.size());
  spec.log_dir = dir;
  spec.timeout_seconds = timeout;
  spec.fork_ranks = fork_ranks;
  return dtlab::grader::launch_ranks(spec);
}

bool alive(long pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0; }

}  // namespace

TEST(GraderForkRanks, RanksOfAProgramWithTheServerAreForkedFromOneStartEachItsOwnProcess) {
  const fs::path dir = dtlab::test::fresh_temp_dir("fork-ranks");
  const LaunchResult r = launch_probes(dir, {0, 0, 0}, {0, 0, 0}, /*fork_ranks=*/true);
  ASSERT_TRUE(r.all_ok());
  std::set<long> pids;
  long server = 0;
  for (int rank = 0; rank < 3; ++rank) {
    const ProbeLine p = probe_line(r.ranks[rank].log);
    ASSERT_EQ(p.rank, rank) << dtlab::io::read_file(r.ranks[rank].log);
    EXPECT_NE(p.started_as, p.pid) << "rank " << rank << " was exec'd, not forked";
    if (rank == 0) server = p.started_as;
    EXPECT_EQ(p.started_as, server) << "one server forks every rank of a run";
    EXPECT_EQ(p.pgid, p.pid) << "rank " << rank << " is not in a process group of its own";
    EXPECT_EQ(p.ppid, ::getpid()) << "rank " << rank << " was not re-parented to the launcher";
    EXPECT_EQ(p.server_env, "unset") << "a rank must not be a server itself";
    pids.insert(p.pid);
  }
  EXPECT_EQ(pids.size(), 3u);
  EXPECT_FALSE(alive(server)) << "the fork server outlived its ranks' start";
  EXPECT_FALSE(fs::exists(dir / "fork-server.log")) << "a server that said nothing leaves no log";
}

// The launcher times and judges forked ranks as it did exec'd ones: each exit code, a rank past
// the deadline killed with its group.
TEST(GraderForkRanks, ForkedRanksExitCodesAndTheDeadlineAreTheLaunchers) {
  const fs::path dir = dtlab::test::fresh_temp_dir("fork-ranks-exits");
  const auto start = std::chrono::steady_clock::now();
  const LaunchResult r = launch_probes(dir, {0, 7, 0}, {0, 0, 60}, /*fork_ranks=*/true, /*timeout=*/3);
  EXPECT_LT(seconds_since(start), 20);
  ASSERT_EQ(r.ranks.size(), 3u);
  EXPECT_EQ(r.ranks[0].exit_code, 0);
  EXPECT_FALSE(r.ranks[0].killed);
  EXPECT_EQ(r.ranks[1].exit_code, 7);
  EXPECT_TRUE(r.ranks[2].killed);
  const ProbeLine sleeper = probe_line(r.ranks[2].log);
  EXPECT_NE(sleeper.started_as, sleeper.pid);
  EXPECT_FALSE(alive(sleeper.pid)) << "the rank killed at the deadline still runs";
}

// fork_ranks = false (DTLAB_EXEC_RANKS=1 in the grader): every rank exec'd, as before the server.
TEST(GraderForkRanks, ExecRanksStartsEachRankByItself) {
  const fs::path dir = dtlab::test::fresh_temp_dir("exec-ranks");
  const LaunchResult r = launch_probes(dir, {0, 0}, {0, 0}, /*fork_ranks=*/false);
  ASSERT_TRUE(r.all_ok());
  for (int rank = 0; rank < 2; ++rank) {
    const ProbeLine p = probe_line(r.ranks[rank].log);
    EXPECT_EQ(p.started_as, p.pid) << dtlab::io::read_file(r.ranks[rank].log);
    EXPECT_EQ(p.pgid, p.pid);
  }
}

// A server that cannot start leaves the ranks to be started one by one, and says why.
TEST(GraderForkRanks, AServerThatCannotStartLeavesEachRankExecdAndSaysWhy) {
  const fs::path dir = dtlab::test::fresh_temp_dir("fork-server-fails");
  ::setenv("DTLAB_FORK_PROBE_SERVER_FAILS", "1", 1);
  const LaunchResult r = launch_probes(dir, {0, 0}, {0, 0}, /*fork_ranks=*/true);
  ::unsetenv("DTLAB_FORK_PROBE_SERVER_FAILS");
  ASSERT_TRUE(r.all_ok());
  for (int rank = 0; rank < 2; ++rank) EXPECT_EQ(probe_line(r.ranks[rank].log).started_as, probe_line(r.ranks[rank].log).pid);
  const std::string why = dtlab::io::read_file(dir / "fork-server.log");
  EXPECT_NE(why.find("every rank started by itself instead"), std::string::npos) << why;
  EXPECT_NE(why.find("exited with status 3"), std::string::npos) << why;
}

