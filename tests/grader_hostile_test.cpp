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
#include <sys/stat.h>
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

}  // namespace
