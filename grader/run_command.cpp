// grader run: an exercise's ranks as local processes or over ssh, with rank 0's output followed;
// or, with --print-commands, the command of every rank and the launchers' lines.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>

#include "commands.h"
#include "dtlab/core/error.h"
#include "fork_ranks.h"
#include "launch.h"
#include "outcome.h"
#include "runs.h"

namespace fs = std::filesystem;

namespace dtlab::grader {
namespace {


bool mentions(const std::vector<std::string>& args, const std::string& flag) {
  for (const auto& a : args) {
    if (a == flag || a.rfind(flag + "=", 0) == 0) return true;
  }
  return false;
}

}  // namespace

int run_command(const RunFlags& f) {
  selected_exercises(f.exercise);
  const bool distributed = !single_process(f.exercise);
  const bool traffic = exercise(f.exercise).kind == "traffic";  // takes its own batch sizes, no --do_train
  LaunchSpec spec;
  spec.binary = fs::absolute(exercise_binary(f.exercise, f.solutions));
  spec.fork_ranks = fork_ranks_by_default();
  spec.world_size = distributed ? f.world : 1;
  spec.port = f.port;
  spec.log_dir = fs::path(f.out) / f.exercise;
  spec.timeout_seconds = f.run_timeout;
  spec.echo_rank0 = true;
  if (!f.hosts.empty()) {
    std::string rest = f.hosts;
    for (size_t at; (at = rest.find(',')) != std::string::npos; rest = rest.substr(at + 1)) spec.hosts.push_back(rest.substr(0, at));
    spec.hosts.push_back(rest);
    spec.world_size = static_cast<int>(spec.hosts.size());
    spec.master = spec.hosts[0];
  }
  // The fixture and the demo's settings, unless the extra flags say otherwise.
  const fs::path fixtures = (f.print_commands ? kSourceDir / "fixtures" : ensure_fixtures());
  const std::string output = fs::absolute(fs::path(f.out) / f.exercise / "output").string();
  std::vector<std::pair<std::string, std::string>> defaults;
  std::vector<const char*> switches = {"--overwrite_output_dir"};
  if (trains_gpt2(f.exercise)) {  // GPT-2 on the translation fixture, as `make dp`
    defaults = {{"--model_name_or_path", (fixtures / "gpt2-tiny").string()},
                {"--data_dir", (fixtures / "translation").string()}, {"--learning_rate", "1e-3"},
                {"--num_epochs", "1"}, {"--output_dir", output}};
    if (distributed) defaults.push_back({"--global_batch_size", "32"});
  } else {
    defaults = {{"--model_name_or_path", (fixtures / "bert-tiny").string()}, {"--data_dir", (fixtures / "RTE").string()},
                {"--task_name", "RTE"}, {"--max_seq_length", "128"}, {"--learning_rate", "3e-4"},
                {"--output_dir", output}};
    if (!traffic) defaults.push_back({"--num_train_epochs", "1"});
    if (distributed && !traffic) defaults.push_back({"--global_batch_size", "32"});
    if (!distributed) defaults.push_back({"--per_gpu_train_batch_size", "32"});
    if (!traffic) switches.insert(switches.begin(), {"--do_train", "--do_eval"});
  }
  for (const auto& [flag, value] : defaults) {
    if (!mentions(f.extra, flag)) spec.args.insert(spec.args.end(), {flag, value});
  }
  for (const char* flag : switches) {
    if (!mentions(f.extra, flag)) spec.args.push_back(flag);
  }
  spec.args.insert(spec.args.end(), f.extra.begin(), f.extra.end());
  std::vector<std::string> launch_args = spec.args;  // before the rank flags: the launchers' own
  if (distributed) {
    spec.args.insert(spec.args.end(), {"--master_ip", "{master}", "--master_port", "{port}", "--world_size",
                                       "{world}", "--local_rank", "{rank}"});
  }

  if (f.print_commands) {
    LaunchSpec local = spec;
    local.hosts.clear();
    fmt::print("# {} with {} rank(s). By hand, one command per rank (rank 0's host is the master):\n", f.exercise,
               spec.world_size);
    for (int r = 0; r < spec.world_size; ++r) {
      LaunchSpec one = local;
      one.master = spec.hosts.empty() ? "127.0.0.1" : spec.hosts[0];
      fmt::print("{}{}\n", spec.hosts.empty() ? "" : "# on " + spec.hosts[r] + ":\n", shell_join(rank_command(one, r, f.port)));
    }
    if (distributed) {
      std::vector<std::string> plain = {spec.binary.string()};
      plain.insert(plain.end(), launch_args.begin(), launch_args.end());
      const std::string master = spec.hosts.empty() ? "HOST0" : spec.hosts[0];
      fmt::print("\n# torchrun, on each of N hosts with P ranks each (node i of N):\n"
                 "torchrun --nnodes=N --nproc_per_node=P --node_rank=i --master_addr={} --master_port={} --no_python {}\n",
                 master, f.port, shell_join(plain));
      fmt::print("\n# Slurm (rank, world and master come from SLURM_PROCID, SLURM_NTASKS, MASTER_ADDR):\n"
                 "MASTER_ADDR={} MASTER_PORT={} srun --ntasks={} {}\n", master, f.port, spec.world_size, shell_join(plain));
      fmt::print("\n# Open MPI:\nmpirun -np {} -x MASTER_ADDR={} -x MASTER_PORT={} {}\n", spec.world_size, master, f.port,
                 shell_join(plain));
    }
    return 0;
  }
  fmt::print("grader: {} rank(s) of {}{}; logs in {}/rank<r>.log; rank 0 follows\n", spec.world_size,
             spec.binary.string(), spec.hosts.empty() ? " on this machine" : " over ssh", spec.log_dir.string());
  std::fflush(stdout);
  const LaunchResult result = launch_ranks(spec);
  RunEvidence evidence;
  evidence.log_paths = true;  // the person who ran it has the files
  if (const auto failure = diagnose(result, f.exercise, evidence)) {
    fmt::print(stderr, "\ngrader: {} ({})\n", failure->message, status_name(failure->status));
    return 1;
  }
  fmt::print("\ngrader: every rank finished in {:.1f} s; logs in {}\n", result.seconds, spec.log_dir.string());
  return 0;
}

}  // namespace dtlab::grader
