// Hostile submissions (Note [Hostile submissions] in tests/mutants/task2b_mutants.cpp), graded
// inside the sandbox (Note [The sandbox], grader/sandbox.h): each attack ends with the grade it
// deserves, the grader finishes within its limits, no file outside the run's scratch folder
// changes, nothing the attack could reach leaks into what the grader reads, and no process is
// left behind. The code under attack is correct apart from the attack, so an attack that had no
// effect leaves the check passed.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <thread>

#include "dtlab/io/json_file.h"
#include "dtlab/tooling/process.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

struct Attack {
  std::string mutant;   // DTLAB_MUTANT
  std::string check;    // graded alone with --only
  std::string outcome;  // how the check ends
  std::string words;    // what its message says ("" for a pass)
  double max_seconds;   // the grading ends within this
};

const std::vector<Attack> kAttacks = {
    // Reads the answers, writes outside its folder, connects out: nothing works, and the work is right.
    {"escape", "broadcast", "passed", "", 120},
    // A daemon rewriting results.json with "full marks" after its rank exited: killed with the run.
    {"daemon", "broadcast", "passed", "", 120},
    // results.json replaced by a link to a secret and a FIFO beside it: neither is followed or opened.
    {"link_results", "gradients", "error", "not a regular file", 180},
    // A fork bomb: stopped at once, not when the deadline comes.
    {"fork_bomb", "broadcast", "crash", "a fork bomb?", 120},
    // Memory without end: the address space limit ends the rank.
    {"memory_bomb", "broadcast", "*", "rank 1", 180},
    // Files until the scratch folder is full: its tmpfs ends them; nothing big comes back.
    {"fill_disk", "broadcast", "*", "", 180},
    // A gigabyte of output: the file size limit ends the rank; its log comes back cut.
    {"flood_output", "broadcast", "crash", "signal 25", 120},
    // kill(-1): the launcher dies with everyone else; the grader says so instead of waiting.
    {"kill_everything", "broadcast", "error", "the sandbox's launcher ended without its report", 120},
    // Files in /, /dev, /dev/shm and /tmp (tmpfs: no process's resident memory): read-only or bounded.
    {"fill_tmpfs", "broadcast", "passed", "", 180},
};

// A TCP listener of the test, on every address of this machine: the sandbox must not reach it.
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 16) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ADD_FAILURE() << "cannot listen";
    }
    port = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd); }
  bool was_reached() const {
    const int c = ::accept(fd, nullptr, nullptr);
    if (c >= 0) ::close(c);
    return c >= 0;
  }
  // "127.0.0.1-PORT:10.0.0.2-PORT": loopback (the host's, not the sandbox's) and the other addresses.
  std::string addresses() const {
    std::string out;
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) return "127.0.0.1-" + std::to_string(port);
    for (const ifaddrs* i = list; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
      char text[INET_ADDRSTRLEN] = {};
      ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
      out += (out.empty() ? "" : ":") + std::string(text) + "-" + std::to_string(port);
    }
    ::freeifaddrs(list);
    return out;
  }
};

// Live processes whose environment holds `variable` (root reads every process's; the attacks
// of one test carry a token of their own, so other suites' gradings at the same time do not count).
int processes_with(const std::string& variable) {
  int count = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string env = read_text(e.path() / "environ");
    for (size_t start = 0; start < env.size();) {
      const size_t end = std::min(env.find('\0', start), env.size());
      if (env.compare(start, end - start, variable) == 0) {
        ++count;
        break;
      }
      start = end + 1;
    }
  }
  return count;
}

// Files under dir, with their sizes.
std::map<std::string, uintmax_t> files_under(const fs::path& dir) {
  std::map<std::string, uintmax_t> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = e.file_size();
  }
  return out;
}

struct Graded {
  dtlab::ProcessResult process;
  double seconds = 0;
  nlohmann::json results;
};

Graded grade(const fs::path& dir, const Attack& a, const std::string& sandbox, const Listener& listener) {
  const fs::path results = dir / "results";  // graded with --only: into results/only/
  const std::string targets = (dir / "secret.txt").string() + ":" + (dir / "sentinel.txt").string() + ":" +
                              (results / "only" / "results.json").string();
  ::setenv("DTLAB_ATTACK", dir.filename().c_str(), 1);  // the grader's ranks inherit these (DTLAB_*)
  ::setenv("DTLAB_MUTANT", a.mutant.c_str(), 1);
  ::setenv("DTLAB_ATTACK_TARGETS", targets.c_str(), 1);
  ::setenv("DTLAB_ATTACK_ADDRESSES", listener.addresses().c_str(), 1);
  const auto start = std::chrono::steady_clock::now();
  Graded g;
  g.process = dtlab::run_process({DTLAB_PROGRAM("grader"), "check", "task2b", "--only", a.check, "--use-binary",
                                  std::string("task2b=") + DTLAB_PROGRAM("task2b-mutants"), "--results", results.string(),
                                  "--timeout", "5", "--threads", "1", "--sandbox", sandbox,
                                  // Every file the runs brought back stays (Note [What a grading keeps]):
                                  // an attack's record of success (escaped.txt) must not be pruned unseen.
                                  "--keep-runs"},
                                 a.max_seconds + 60);
  g.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const char* v : {"DTLAB_ATTACK", "DTLAB_MUTANT", "DTLAB_ATTACK_TARGETS", "DTLAB_ATTACK_ADDRESSES"}) ::unsetenv(v);
  if (fs::exists(results / "only" / "results.json")) g.results = dtlab::io::read_json_file(results / "only" / "results.json");
  return g;
}

// What must hold after every attack, whatever it was.
void expect_contained(const fs::path& dir, const Graded& g, const Listener& listener) {
  EXPECT_EQ(read_text(dir / "secret.txt"), "the answers\n");
  EXPECT_EQ(read_text(dir / "sentinel.txt"), "untouched\n");
  EXPECT_FALSE(listener.was_reached()) << "a rank connected to the test's listener";
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(processes_with("DTLAB_ATTACK=" + dir.filename().string()), 0) << "a process of the run outlived the grading";
  const std::string results_text = read_text(dir / "results" / "only" / "results.json");
  EXPECT_EQ(results_text.find("hacked"), std::string::npos) << results_text;
  uintmax_t total = 0;
  for (const auto& [path, size] : files_under(dir / "results")) {
    EXPECT_EQ(path.find("escaped.txt"), std::string::npos) << "the attack recorded a success: "
                                                          << read_text(dir / "results" / path);
    EXPECT_LE(size, 128u << 20) << path;
    total += size;
  }
  EXPECT_LE(total, 600u << 20);
  ASSERT_TRUE(g.results.contains("tests")) << g.process.output;
}

class HostileSubmissions : public ::testing::TestWithParam<Attack> {};

TEST_P(HostileSubmissions, EndWithTheirGradeAndLeaveNothingBehind) {
  const Attack& a = GetParam();
  const fs::path dir = dtlab::test::fresh_temp_dir("hostile-" + a.mutant);
  write_text(dir / "secret.txt", "the answers\n");
  write_text(dir / "sentinel.txt", "untouched\n");
  const Listener listener;
  // bwrap by name, not auto: where bubblewrap is missing (a machine that skipped scripts/setup.sh,
  // as a GPU node did), auto would fall back to user mode, whose protection is file permissions,
  // and every attack would fail on what user mode does not promise; bwrap fails at once instead,
  // with the grader's one line saying why.
  const Graded g = grade(dir, a, "bwrap", listener);
  ASSERT_FALSE(g.process.timed_out) << g.process.output;
  ASSERT_TRUE(g.results.is_object()) << "no results.json: " << g.process.output;
  EXPECT_LT(g.seconds, a.max_seconds) << g.process.output;
  expect_contained(dir, g, listener);
  ASSERT_EQ(g.results.at("tests").size(), 1u);
  const auto& t = g.results.at("tests").at(0);
  // The mode the tests are about (scripts/setup.sh installs bubblewrap).
  EXPECT_EQ(g.results.at("extra_data").at("provenance").value("sandbox", "").rfind("bwrap", 0), 0u)
      << g.results.dump(2);
  if (a.outcome == "passed") {
    EXPECT_EQ(t.at("extra_data").at("outcome"), "passed") << t.dump(2);
    EXPECT_EQ(g.process.exit_code, 0) << g.process.output;
  } else {
    EXPECT_EQ(t.at("score").get<double>(), 0.0) << t.dump(2);
    EXPECT_EQ(g.process.exit_code, 1) << g.process.output;
    if (a.outcome != "*") {
      EXPECT_EQ(t.at("extra_data").at("outcome"), a.outcome) << t.dump(2);
    }
  }
  EXPECT_NE(t.at("output").get<std::string>().find(a.words), std::string::npos) << t.dump(2);
  if (a.mutant == "daemon") {  // later still, the daemon would have rewritten it by now
    std::this_thread::sleep_for(std::chrono::seconds(1));
    EXPECT_EQ(dtlab::io::read_json_file(dir / "results" / "only" / "results.json"), g.results);
  }
  if (a.mutant == "fill_tmpfs") {  // what each mount took: nothing on the read-only ones, at most its size
    std::ifstream in(dir / "results" / "only" / "runs" / "task2b-broadcast-w2" / "output" / "filled.txt");
    std::map<std::string, uint64_t> filled;
    std::string folder;
    uint64_t bytes = 0;
    while (in >> folder >> bytes) filled[folder] = bytes;
    ASSERT_EQ(filled.size(), 4u) << "filled.txt did not come back";
    EXPECT_EQ(filled["/"], 0u);
    EXPECT_EQ(filled["/dev"], 0u);
    EXPECT_LE(filled["/dev/shm"], 64u << 20);  // SandboxLimits::shm_bytes
    EXPECT_LE(filled["/tmp"], 256u << 20);     // SandboxLimits::tmp_bytes
  }
  if (a.mutant == "flood_output") {  // the log comes back as its last MiB, said to be cut
    const std::string log = read_text(dir / "results" / "only" / "runs" / "task2b-broadcast-w2" / "rank0.log");
    EXPECT_LE(log.size(), (1u << 20) + 200);
    EXPECT_EQ(log.rfind("[dtlab sandbox: the first ", 0), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Task2b, HostileSubmissions, ::testing::ValuesIn(kAttacks),
                         [](const ::testing::TestParamInfo<Attack>& p) { return p.param.mutant; });

// The fallback where user namespaces are forbidden: a separate uid, rlimits and a network
// namespace (root only: switching uid needs it). Files are protected by their permissions there
// (docs/GRADING.md), so the secret and the sentinel are the instructor's own (0600).
TEST(HostileSubmissions, UserModeContainsTheEscape) {
  if (::geteuid() != 0) GTEST_SKIP() << "--sandbox user switches to another uid, which needs root";
  const fs::path dir = dtlab::test::fresh_temp_dir("hostile-user-escape");
  write_text(dir / "secret.txt", "the answers\n");
  write_text(dir / "sentinel.txt", "untouched\n");
  for (const char* f : {"secret.txt", "sentinel.txt"}) fs::permissions(dir / f, fs::perms::owner_read | fs::perms::owner_write);
  const Listener listener;
  const Graded g = grade(dir, kAttacks.at(0), "user", listener);
  ASSERT_FALSE(g.process.timed_out) << g.process.output;
  expect_contained(dir, g, listener);
  EXPECT_EQ(g.results.at("extra_data").at("provenance").value("sandbox", "").rfind("user (a uid of each run's own", 0), 0u);
  EXPECT_EQ(g.results.at("tests").at(0).at("extra_data").at("outcome"), "passed") << g.results.dump(2);
}

// Note [User mode's own files]: in user mode each run has a uid of its own and the files the
// grader wrote before it (the reference runs' results and dumps, the training order) are the
// grader's alone: a rank that walks the results folder reads nothing, and the check still passes
// (its training order reached it as a copy in its own scratch folder).
TEST(HostileSubmissions, UserModeRanksCannotReadOtherRunsFiles) {
  if (::geteuid() != 0) GTEST_SKIP() << "--sandbox user switches to another uid, which needs root";
  const fs::path dir = dtlab::test::fresh_temp_dir("hostile-user-read-runs");
  write_text(dir / "secret.txt", "the answers\n");
  write_text(dir / "sentinel.txt", "untouched\n");
  for (const char* f : {"secret.txt", "sentinel.txt"}) fs::permissions(dir / f, fs::perms::owner_read | fs::perms::owner_write);
  const Listener listener;
  const Graded g = grade(dir, {"read_runs", "gradients", "passed", "", 240}, "user", listener);
  ASSERT_FALSE(g.process.timed_out) << g.process.output;
  expect_contained(dir, g, listener);  // no escaped.txt: nothing was read
  // The kit's reference run did write there first: the attack had something to read.
  bool reference_run = false;
  for (const auto& [path, size] : files_under(dir / "results" / "only" / "runs")) {
    reference_run |= path.find("reference") != std::string::npos && path.find("results.json") != std::string::npos;
  }
  EXPECT_TRUE(reference_run) << g.process.output;
  EXPECT_EQ(g.results.at("tests").at(0).at("extra_data").at("outcome"), "passed") << g.results.dump(2);
}

// A rank in user mode is in a session of its own, without a controlling terminal: it cannot
// open the grader's terminal to push input into it (TIOCSTI). The test and the grader it starts
// share a session, so a rank in that session would report the test's.
TEST(HostileSubmissions, UserModeRanksHaveASessionOfTheirOwn) {
  if (::geteuid() != 0) GTEST_SKIP() << "--sandbox user switches to another uid, which needs root";
  const fs::path dir = dtlab::test::fresh_temp_dir("hostile-user-session");
  write_text(dir / "secret.txt", "the answers\n");
  write_text(dir / "sentinel.txt", "untouched\n");
  const Listener listener;
  const Graded g = grade(dir, {"session", "broadcast", "passed", "", 120}, "user", listener);
  ASSERT_FALSE(g.process.timed_out) << g.process.output;
  std::ifstream in(dir / "results" / "only" / "runs" / "task2b-broadcast-w2" / "output" / "session.txt");
  pid_t session = 0;
  std::string tty;
  ASSERT_TRUE(in >> session >> tty) << "session.txt did not come back: " << g.process.output;
  EXPECT_NE(session, ::getsid(0));
  EXPECT_GT(session, 0);
  EXPECT_EQ(tty, "no-tty");
}

dtlab::ProcessResult run_grader(const std::vector<std::string>& args, double timeout) {
  std::vector<std::string> argv = {DTLAB_PROGRAM("grader")};
  argv.insert(argv.end(), args.begin(), args.end());
  return dtlab::run_process(argv, timeout);
}

// User mode cannot hide files from a submission's compile: a submission that is one #include of
// the reference by its absolute path would score full marks (as a rank could run
// build/task2b-solution). While the sandbox's uid can read the answers, the grader refuses a
// submission at once, naming what it can read and what to do.
TEST(HostileSubmissions, UserModeRefusesASubmissionWhileTheAnswersAreReadable) {
  if (::geteuid() != 0) GTEST_SKIP() << "--sandbox user switches to another uid, which needs root";
  const fs::path solutions = fs::path(DTLAB_SOURCE_DIR) / "solutions";
  if ((fs::status(solutions / "task2b").permissions() & fs::perms::others_read) == fs::perms::none) {
    GTEST_SKIP() << solutions << " is not readable by others here: the refusal has nothing to refuse";
  }
  const fs::path dir = dtlab::test::fresh_temp_dir("hostile-user-include");
  fs::create_directories(dir / "student" / "task2b");
  write_text(dir / "student" / "task2b" / "sync.cpp", "#include \"" + (solutions / "task2b" / "sync.cpp").string() + "\"\n");
  const auto r = run_grader({"check", "task2b", "--only", "broadcast", "--submission", (dir / "student").string(),
                             "--results", (dir / "results").string(), "--timeout", "5", "--threads", "1", "--sandbox",
                             "user"},
                            120);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("can read the kit's answers"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(solutions.string()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("chmod -R go-rwx"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("grader: building"), std::string::npos) << "refused after work began: " << r.output;
  EXPECT_FALSE(fs::exists(dir / "results" / "only" / "results.json")) << "something was graded";
}

// A results folder of mode 0700 (what `mktemp -d` makes, a root's home): the sandbox's uid cannot
// walk into it, and the runs still get what they read from it (the kit's training order for the
// equivalence runs). Graded as root, in each mode.
class PrivateResults : public ::testing::TestWithParam<std::string> {};

TEST_P(PrivateResults, GradingIntoAFolderOfMode0700Works) {
  if (::geteuid() != 0) GTEST_SKIP() << "the sandbox's uid differs from the grader's only as root";
  const fs::path dir = dtlab::test::fresh_temp_dir("private-results-" + GetParam());
  fs::permissions(dir, fs::perms::owner_all);
  const auto r = run_grader({"check", "task2b", "--solutions", "--only", "gradients", "--results",
                             (dir / "results").string(), "--timeout", "10", "--threads", "1", "--sandbox", GetParam()},
                            400);
  ASSERT_FALSE(r.timed_out) << r.output;
  const nlohmann::json results = dtlab::io::read_json_file(dir / "results" / "only" / "results.json");
  EXPECT_EQ(results.at("tests").at(0).at("extra_data").at("outcome"), "passed") << results.dump(2);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Modes, PrivateResults, ::testing::Values("bwrap", "user"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

std::string file_identity(const fs::path& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return "missing";
  return read_text(path) + "@" + std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

// Batch grading: each submission compiles where no earlier submission's output is, and the
// instructor's build is only read (its CMakeCache.txt, its build/submission/). A later student
// whose code .incbin's an earlier student's binary, where the earlier grading wrote it, fails to
// build.
TEST(HostileSubmissions, ASubmissionCannotReadAnEarlierOnesBinary) {
  const fs::path dir = dtlab::test::fresh_temp_dir("hostile-batch");
  const fs::path cache = fs::path(DTLAB_BINARY_DIR) / "CMakeCache.txt";
  const std::string cache_before = file_identity(cache);
  const bool submission_folder_before = fs::exists(fs::path(DTLAB_BINARY_DIR) / "submission");
  // A source file that puts each file's bytes into the binary.
  auto incbin = [](const std::vector<fs::path>& files) {
    std::string text = "#include \"dtlab/tasks/task2b.h\"\n";
    for (size_t i = 0; i < files.size(); ++i) {
      text += "asm(\".section .rodata\\n.global stolen" + std::to_string(i) + "\\nstolen" + std::to_string(i) +
              ":\\n.incbin \\\"" + files[i].string() + "\\\"\\n.previous\");\n";
    }
    return text;
  };
  // Alice: the skeleton (it compiles, and fails at run time with its TODO), and a file that
  // .incbin's a header of the kit, which the compile may read: .incbin works in the jail.
  fs::create_directories(dir / "alice");
  fs::copy(fs::path(DTLAB_SOURCE_DIR) / "tasks" / "task2b", dir / "alice" / "task2b");
  write_text(dir / "alice" / "task2b" / "stolen.cpp",
             incbin({fs::path(DTLAB_SOURCE_DIR) / "common" / "include" / "dtlab" / "tasks" / "task2b.h"}));
  const auto alice = run_grader({"check", "task2b", "--only", "broadcast", "--submission", (dir / "alice").string(),
                                 "--results", (dir / "grades-alice").string(), "--timeout", "5", "--threads", "1",
                                 "--sandbox", "bwrap"},
                                400);
  ASSERT_FALSE(alice.timed_out) << alice.output;
  const nlohmann::json graded = dtlab::io::read_json_file(dir / "grades-alice" / "only" / "results.json");
  ASSERT_NE(graded.at("tests").at(0).at("extra_data").at("outcome"), "build failed") << graded.dump(2);
  EXPECT_NE(alice.output.find("grader: built in "), std::string::npos) << alice.output;
  // The instructor's build is as it was.
  EXPECT_EQ(file_identity(cache), cache_before);
  EXPECT_EQ(fs::exists(fs::path(DTLAB_BINARY_DIR) / "submission"), submission_folder_before);
  // Bob: .incbin of every file of Alice's grading, and of where an older grader built hers.
  // Only files that exist: .incbin of a missing one fails whatever the jail does.
  std::vector<fs::path> targets;
  if (fs::exists(fs::path(DTLAB_BINARY_DIR) / "submission" / "task2b")) {
    targets.push_back(fs::path(DTLAB_BINARY_DIR) / "submission" / "task2b");
  }
  for (const auto& e : fs::recursive_directory_iterator(dir / "grades-alice")) {
    if (e.is_regular_file()) targets.push_back(e.path());
  }
  ASSERT_FALSE(targets.empty());
  fs::create_directories(dir / "bob");
  fs::copy(fs::path(DTLAB_SOURCE_DIR) / "tasks" / "task2b", dir / "bob" / "task2b");
  write_text(dir / "bob" / "task2b" / "stolen.cpp", incbin(targets));
  const auto bob = run_grader({"check", "task2b", "--only", "broadcast", "--submission", (dir / "bob").string(),
                               "--results", (dir / "grades-bob").string(), "--timeout", "5", "--threads", "1",
                               "--sandbox", "bwrap"},
                              400);
  ASSERT_FALSE(bob.timed_out) << bob.output;
  const nlohmann::json bobs = dtlab::io::read_json_file(dir / "grades-bob" / "only" / "results.json");
  const auto& t = bobs.at("tests").at(0);
  EXPECT_EQ(t.at("extra_data").at("outcome"), "build failed") << t.dump(2);
  EXPECT_NE(t.at("output").get<std::string>().find("does not compile"), std::string::npos) << t.dump(2);
  EXPECT_EQ(file_identity(cache), cache_before);
}

// What all runs of a grading bring back is bounded (pp makes about 15 runs of up to 512 MiB
// each): with a bound of 1 MiB, the gradient dumps (17 MiB a rank) stay behind, run.json says
// why, and the check cannot pass on what did not come back.
TEST(HostileSubmissions, AGradingBringsBackAtMostItsBound) {
  const fs::path dir = dtlab::test::fresh_temp_dir("grading-copy-bound");
  ::setenv("DTLAB_SANDBOX_GRADING_COPY_MIB", "1", 1);
  const auto r = run_grader({"check", "task2b", "--solutions", "--only", "gradients", "--results",
                             (dir / "results").string(), "--timeout", "10", "--threads", "1", "--sandbox", "bwrap"},
                            300);
  ::unsetenv("DTLAB_SANDBOX_GRADING_COPY_MIB");
  ASSERT_FALSE(r.timed_out) << r.output;
  uintmax_t total = 0;
  std::string left_out;
  for (const auto& [path, size] : files_under(dir / "results")) {
    if (path.find("/output/") != std::string::npos || path.find("/dump/") != std::string::npos) total += size;
    if (fs::path(path).filename() == "run.json") left_out += read_text(dir / "results" / path);
  }
  EXPECT_LE(total, 1u << 20);
  EXPECT_NE(left_out.find("over the grading's limit of 1 MiB brought back"), std::string::npos) << left_out;
  const nlohmann::json results = dtlab::io::read_json_file(dir / "results" / "only" / "results.json");
  EXPECT_EQ(results.at("tests").at(0).at("extra_data").at("outcome"), "error") << results.dump(2);
  EXPECT_NE(results.at("tests").at(0).at("output").get<std::string>().find("over the grading's limit of 1 MiB"),
            std::string::npos) << results.dump(2);
  EXPECT_NE(r.exit_code, 0);
}

// Processes of one uid, held until destroyed: the state another grading's fork bomb leaves
// while its launcher stops it (the bomb holds up to its sandbox's limit, 512, of bwrap's shared
// uid), or a desktop where the grader's own user runs a browser's hundreds of threads.
class HeldProcesses {
 public:
  HeldProcesses(int count, uid_t uid, gid_t gid) {
    int ready[2];
    if (::pipe(ready) != 0) return;
    for (int i = 0; i < count; ++i) {
      const pid_t pid = ::fork();
      if (pid < 0) break;
      if (pid == 0) {  // only async-signal-safe calls: the test may have threads
        if (::getuid() != uid && (::setgroups(0, nullptr) != 0 || ::setresgid(gid, gid, gid) != 0 ||
                                  ::setresuid(uid, uid, uid) != 0)) {
          ::_exit(1);
        }
        (void)!::write(ready[1], "x", 1);
        ::pause();
        ::_exit(0);
      }
      pids_.push_back(pid);
    }
    ::close(ready[1]);
    char byte;
    while (ready_ < static_cast<int>(pids_.size())) {
      pollfd p{ready[0], POLLIN, 0};
      if (::poll(&p, 1, 10000) <= 0 || ::read(ready[0], &byte, 1) != 1) break;
      ++ready_;
    }
    ::close(ready[0]);
  }
  ~HeldProcesses() {
    for (const pid_t pid : pids_) ::kill(pid, SIGKILL);
    for (const pid_t pid : pids_) ::waitpid(pid, nullptr, 0);
  }
  int ready() const { return ready_; }

 private:
  std::vector<pid_t> pids_;
  int ready_ = 0;
};

// bwrap's runs share one uid (61000 as root, the grader's own otherwise), and a process limit set
// before bwrap counts every process of that uid on the machine: with 600 of them held, as while
// a fork bomb of another grading is being stopped, a grading still starts its sandbox and passes.
// (CI saw the probe of bwrap fail with EAGAIN beside the fork bomb's test, ctest running both.)
TEST(HostileSubmissions, AGradingStartsWhileItsUidHoldsManyProcesses) {
  const bool root = ::geteuid() == 0;
  const HeldProcesses held(600, root ? 61000 : ::getuid(), root ? 61000 : ::getgid());
  ASSERT_EQ(held.ready(), 600) << "could not hold 600 processes of the sandbox's uid";
  const fs::path dir = dtlab::test::fresh_temp_dir("grading-beside-many-processes");
  const auto r = run_grader({"check", "task2b", "--solutions", "--only", "broadcast", "--results",
                             (dir / "results").string(), "--timeout", "10", "--threads", "1", "--sandbox", "bwrap"},
                            300);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(fs::exists(dir / "results" / "only" / "results.json")) << r.output;
  const nlohmann::json results = dtlab::io::read_json_file(dir / "results" / "only" / "results.json");
  EXPECT_EQ(results.at("tests").at(0).at("extra_data").at("outcome"), "passed") << results.dump(2);
}

// A compile that writes an object past the compile's file size limit (256 MiB) is stopped, and
// the verdict names the limits.
TEST(HostileSubmissions, ACompileOverItsLimitsIsStoppedAndSaysWhy) {
  const fs::path dir = dtlab::test::fresh_temp_dir("hostile-compile-limit");
  fs::create_directories(dir / "student");
  fs::copy(fs::path(DTLAB_SOURCE_DIR) / "tasks" / "task2b", dir / "student" / "task2b");
  write_text(dir / "student" / "task2b" / "huge.cpp", "asm(\".data\\n.skip 400000000\\n.previous\");\n");
  const auto r = run_grader({"check", "task2b", "--only", "broadcast", "--submission", (dir / "student").string(),
                             "--results", (dir / "results").string(), "--timeout", "5", "--threads", "1", "--sandbox",
                             "bwrap"},
                            300);
  ASSERT_FALSE(r.timed_out) << r.output;
  const nlohmann::json results = dtlab::io::read_json_file(dir / "results" / "only" / "results.json");
  const auto& t = results.at("tests").at(0);
  EXPECT_EQ(t.at("extra_data").at("outcome"), "build failed") << t.dump(2);
  const std::string output = t.at("output").get<std::string>();
  EXPECT_NE(output.find("the compile was stopped"), std::string::npos) << output;
  EXPECT_NE(output.find("files of 256 MiB"), std::string::npos) << output;
}

}  // namespace
