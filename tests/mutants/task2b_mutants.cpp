// Deliberately broken task 2b solutions, one per mistake students make, chosen at run time by
// DTLAB_MUTANT (unset: correct). grader_mutants_test grades each and expects the check that
// should catch it to fail with the right words, so a check that stops catching its bug fails
// CI. Test code: never part of a student release (it is one line from the solution).
#include <torch/nn/utils/clip_grad.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <new>
#include <vector>

#include "dtlab/tasks/task2b.h"

namespace dtlab::task2b {
namespace {

bool mutant(const char* name) {
  const char* m = std::getenv("DTLAB_MUTANT");
  return m && std::string(m) == name;
}

std::vector<std::string> split(const char* text) {
  std::vector<std::string> out;
  std::string s = text ? text : "";
  for (size_t start = 0; start < s.size();) {
    const size_t colon = std::min(s.find(':', start), s.size());
    if (colon > start) out.push_back(s.substr(start, colon - start));
    start = colon + 1;
  }
  return out;
}

// Note [Hostile submissions]: attacks on the grader (grader_hostile_test), one per DTLAB_MUTANT,
// run by every rank before anything else when DTLAB_ATTACK is set. DTLAB_ATTACK_TARGETS names files outside the run's
// scratch folder (the solutions, the grader's results, a file of the test's), DTLAB_ATTACK_ADDRESSES
// listeners of the test ("ip-port"). What an attack manages to do it records in its output folder
// (escaped.txt), where the grader would see it.
void record(const std::string& output_dir, const std::string& what) {
  std::ofstream(output_dir + "/escaped.txt", std::ios::app) << what << "\n";
}

void attack(const dist::Settings& settings, const std::string& output_dir) {
  std::filesystem::create_directories(output_dir);
  const auto targets = split(std::getenv("DTLAB_ATTACK_TARGETS"));
  if (mutant("escape")) {  // read the answers, write outside, reach the network
    for (const auto& t : targets) {
      std::ifstream in(t);
      std::string line;
      if (in && std::getline(in, line)) record(output_dir, "read " + t);
      if (std::ofstream(t, std::ios::app) << "attacked\n") record(output_dir, "wrote " + t);
    }
    for (const auto& address : split(std::getenv("DTLAB_ATTACK_ADDRESSES"))) {
      const size_t at = address.rfind('-');
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(at + 1))));
      ::inet_pton(AF_INET, address.substr(0, at).c_str(), &a.sin_addr);
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0) record(output_dir, "connected " + address);
      ::close(fd);
    }
  }
  if (mutant("daemon") && settings.rank == 0 && ::fork() == 0) {
    // A daemon that outlives its rank, ignores SIGTERM and keeps writing "full marks" where the
    // grader reads, and into every target, for two minutes.
    ::setsid();
    std::signal(SIGTERM, SIG_IGN);
    std::signal(SIGHUP, SIG_IGN);
    for (int i = 0; i < 1200; ++i) {
      std::ofstream(output_dir + "/results.json") << R"({"hacked": "full marks"})";
      for (const auto& t : targets) std::ofstream(t) << R"({"hacked": "full marks"})";
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::_exit(0);
  }
  if (mutant("link_results") && settings.rank == 0) {
    // When the rank exits (after the driver wrote them): results.json a link to a secret, the dump
    // a FIFO that blocks whoever opens it.
    static std::string out;
    static std::string target;
    out = output_dir;
    target = targets.empty() ? "/etc/passwd" : targets.front();
    std::atexit([] {
      ::unlink((out + "/results.json").c_str());
      (void)!::symlink(target.c_str(), (out + "/results.json").c_str());
      ::mkfifo((out + "/timeline.json").c_str(), 0644);
    });
  }
  if (mutant("fork_bomb") && settings.rank == 1) {
    while (true) {
      if (::fork() < 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  if (mutant("memory_bomb") && settings.rank == 1) {
    std::vector<char*> blocks;
    while (true) {
      char* block = new char[1 << 28];
      for (size_t i = 0; i < (1u << 28); i += 4096) block[i] = 1;  // touched: real memory
      blocks.push_back(block);
    }
  }
  if (mutant("fill_disk") && settings.rank == 0) {
    // Files of 200 MiB (under the file size limit) until the disk is full, then on as usual.
    const std::string chunk(1 << 20, 'x');
    for (int f = 0; f < 64; ++f) {
      std::ofstream big(output_dir + "/fill" + std::to_string(f) + ".bin", std::ios::binary);
      for (int i = 0; i < 200 && big; ++i) big.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      if (!big.flush()) break;
    }
  }
  if (mutant("flood_output") && settings.rank == 0) {
    const std::string line(1023, 'y');
    for (int i = 0; i < (1 << 20); ++i) std::puts(line.c_str());
  }
  if (mutant("kill_everything") && settings.rank == 0) ::kill(-1, SIGKILL);  // the launcher too
  if (mutant("fill_tmpfs") && settings.rank == 0) {
    // Every writable mount outside the scratch folder, up to 1 GiB each: tmpfs pages are no
    // process's resident memory. What each took is in filled.txt ("<folder> <bytes>"), then freed.
    const std::string chunk(1 << 20, 'x');
    std::ofstream report(output_dir + "/filled.txt");
    for (const char* folder : {"/", "/dev", "/dev/shm", "/tmp"}) {
      uint64_t written = 0;
      std::vector<std::string> files;
      // Files of 128 MiB, under the file size limit (RLIMIT_FSIZE would end the rank first).
      for (int f = 0; f < 8; ++f) {
        files.push_back(std::string(folder) + (folder[1] ? "/" : "") + "dtlab-fill" + std::to_string(f) + ".bin");
        const int fd = ::open(files.back().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) break;
        uint64_t in_file = 0;
        while (in_file < (128u << 20)) {
          const ssize_t n = ::write(fd, chunk.data(), chunk.size());
          if (n <= 0) break;
          in_file += static_cast<uint64_t>(n);
        }
        ::close(fd);
        written += in_file;
        if (in_file < (128u << 20)) break;
      }
      for (const auto& file : files) ::unlink(file.c_str());
      report << folder << " " << written << "\n";
    }
  }
  if (mutant("read_runs")) {
    // Every file of the grading's results folder (the third target's): the kit's reference runs
    // wrote their losses and dumps there before this run started.
    if (targets.size() >= 3) {
      std::error_code ec;
      const auto folder = std::filesystem::path(targets[2]).parent_path();
      for (auto it = std::filesystem::recursive_directory_iterator(folder, ec);
           !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        std::ifstream in(it->path());
        char c;
        if (it->is_regular_file(ec) && in.get(c)) record(output_dir, "read " + it->path().string());
      }
    }
  }
  if (mutant("session") && settings.rank == 0) {
    // A rank that shares the grader's session could open its terminal and push input into it
    // (TIOCSTI): the session it is in, and whether /dev/tty opens (nothing is pushed).
    const int tty = ::open("/dev/tty", O_RDWR | O_CLOEXEC);
    std::ofstream(output_dir + "/session.txt") << ::getsid(0) << " " << (tty >= 0 ? "tty" : "no-tty") << "\n";
    if (tty >= 0) ::close(tty);
  }
}

}  // namespace

std::unique_ptr<dist::Group> setup(const dist::Settings& settings) {
  // The sandbox's HOME is the run's scratch folder, whose output/ the grader brings back.
  if (std::getenv("DTLAB_ATTACK") && std::getenv("HOME")) attack(settings, std::string(std::getenv("HOME")) + "/output");
  return dist::init_process_group(settings);
}

void broadcast_parameters(torch::nn::Module& model, dist::Group& group) {
  if (mutant("no_broadcast")) return;
  const int src = mutant("broadcast_from_rank1") ? 1 : 0;
  torch::NoGradGuard no_grad;
  for (auto& p : model.parameters()) group.broadcast(p, src, "initial parameters");
  for (auto& b : model.buffers()) group.broadcast(b, src, "initial buffers");
}

data::SamplerOptions make_sampler(int64_t dataset_size, const dist::Group& group, uint64_t seed) {
  if (mutant("overlapping_shards")) return {dataset_size, group.size(), 0, true, seed};  // everyone is rank 0
  if (mutant("missing_shards")) {  // each rank shuffles its own way: shards miss and overlap
    return {dataset_size, group.size(), group.rank(), true, seed + static_cast<uint64_t>(group.rank())};
  }
  return {dataset_size, group.size(), group.rank(), true, seed};
}

void sync_gradients(torch::nn::Module& model, dist::Group& group) {
  if (mutant("sleep_forever") && group.rank() == 1) std::this_thread::sleep_for(std::chrono::hours(24));
  if (mutant("crash") && group.rank() == 1) std::raise(SIGSEGV);
  // Every rank waits for a signal that no rank sends (a hand-made barrier on a flag), outside any
  // kit operation: no collective times out, so only the grader's deadline ends the run.
  if (mutant("all_wait_forever") && group.size() > 1) {
    while (true) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (mutant("only_rank0_syncs") && group.rank() != 0) return;  // the most common data-parallel bug
  // Clipped on each rank before the average, to the norm the grader's equivalence runs use
  // (--max_grad_norm 0.1), as a student passing the run's norm along would.
  if (mutant("clip_before_sync")) torch::nn::utils::clip_grad_norm_(model.parameters(), 0.1);
  const auto parameters = model.parameters();
  // half_synced: the loop stops halfway (an off-by-half bound, or a list of "the encoder's" only).
  const size_t count = mutant("half_synced") ? parameters.size() / 2 : parameters.size();
  const dist::ReduceOp op = mutant("max_not_sum") ? dist::ReduceOp::MAX : dist::ReduceOp::SUM;
  for (size_t i = 0; i < count; ++i) {
    torch::Tensor p = parameters[i];
    if (!p.grad().defined()) continue;
    // half_precision_wire: each gradient rounded to fp16 for the wire and back (half the bytes),
    // then averaged: off by up to 2^-11 of each element, the smallest mistake the gradient
    // tolerance must catch (Note [What each tolerance must catch], grader/checks.h).
    if (mutant("half_precision_wire")) p.mutable_grad().copy_(p.grad().to(torch::kHalf).to(torch::kFloat));
    group.all_reduce(p.mutable_grad(), op, "gradients");
    if (!mutant("sum_not_average")) p.mutable_grad().div_(group.size());
  }
}

}  // namespace dtlab::task2b
