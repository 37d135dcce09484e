// Rank and world from flags or launcher environment, see dist/settings.h.
#include "dtlab/dist/settings.h"

#include <CLI/CLI.hpp>

#include <cstdlib>
#include <sstream>

#include "dtlab/core/error.h"

extern char** environ;

namespace dtlab::dist {
namespace {

// The environment variables one launcher sets.
struct Launcher {
  const char* name;
  const char* rank;
  const char* world;
  const char* local_rank;
  const char* master_addr;  // may be null: the launcher does not say
};

constexpr Launcher kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", nullptr},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_LAUNCH_NODE_IPADDR"},
};

int parse_int(const std::string& text, const std::string& what) {
  try {
    size_t used = 0;
    const int value = std::stoi(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  throw Error(what + " must be an integer, got \"" + text + "\"");
}

const std::string* find(const Environment& env, const char* key) {
  if (!key) return nullptr;
  auto it = env.find(key);
  return it == env.end() ? nullptr : &it->second;
}

// Takes the flag's value, else the variable's; both present and different is an error.
template <typename T>
std::optional<T> merge(const std::optional<T>& flag, const char* flag_name,
                       const std::optional<T>& variable, const std::string& variable_name) {
  if (flag && variable && *flag != *variable) {
    std::ostringstream msg;
    msg << flag_name << " " << *flag << " conflicts with " << variable_name << "=" << *variable
        << " set by the launcher: give one or make them agree";
    throw Error(msg.str());
  }
  return flag ? flag : variable;
}

}  // namespace

void add_launch_flags(CLI::App& app, LaunchFlags& f) {
  app.add_option("--master_ip", f.master_ip, "Address of rank 0 (the rendezvous); MASTER_ADDR");
  app.add_option("--master_port", f.master_port, "Port of the rendezvous on the master; MASTER_PORT");
  app.add_option("--world_size", f.world_size, "Number of ranks; WORLD_SIZE");
  app.add_option("--local_rank", f.rank, "Rank of this process, 0..world_size-1 (the assignment's name); RANK");
  app.add_option("--backend", f.backend, "Collective backend: gloo (CPU) or nccl (GPUs)")
      ->capture_default_str();
  app.add_option("--timeout", f.timeout_seconds,
                 "Seconds any rank waits for another (rendezvous and every collective)")
      ->capture_default_str();
  app.add_option("--interface", f.interface,
                 "Network interface Gloo uses (default: the one that reaches the master)");
  app.add_flag("--distributed_debug", f.distributed_debug,
               "Before every collective, check that every rank calls the same one (op, tag, dtype, "
               "shape); a mismatch stops every rank saying what each called. DTLAB_DISTRIBUTED_DEBUG=1 "
               "does the same");
  app.add_option("--beat_file", f.beat_file,
                 "Also write this rank's heartbeat (step, operation) to this file every half second, for a "
                 "launcher that watches for ranks that stopped making progress (the grader does)");
}

Environment launcher_environment() {
  Environment env;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = entry.substr(0, eq);
    if (key == "RANK" || key == "WORLD_SIZE" || key == "LOCAL_RANK" || key == "MASTER_ADDR" ||
        key == "MASTER_PORT" || key.rfind("OMPI_COMM_WORLD_", 0) == 0 || key.rfind("SLURM_", 0) == 0 ||
        key.rfind("TORCHELASTIC_", 0) == 0 || key == "DTLAB_DISTRIBUTED_DEBUG") {
      env[key] = entry.substr(eq + 1);
    }
  }
  return env;
}

Settings resolve_settings(const LaunchFlags& flags, const Environment& env) {
  Settings s;
  s.check_collectives = flags.distributed_debug;
  s.beat_file = flags.beat_file;
  if (const auto it = env.find("DTLAB_DISTRIBUTED_DEBUG"); it != env.end()) {
    const std::string& v = it->second;
    if (v == "1" || v == "DETAIL" || v == "detail" || v == "on") {
      s.check_collectives = true;
    } else if (!(v.empty() || v == "0" || v == "OFF" || v == "off")) {
      throw Error("DTLAB_DISTRIBUTED_DEBUG=" + v + " is not known: use 1 (or DETAIL) to check that the ranks call "
                  "the same collectives, 0 (or OFF) not to");
    }
  }
  s.backend = flags.backend;
  if (s.backend != "gloo" && s.backend != "nccl") {
    throw Error("--backend " + s.backend + " is not known: use gloo or nccl");
  }
#ifndef USE_C10D_NCCL
  if (s.backend == "nccl") {
    throw Error("--backend nccl: this LibTorch was built without NCCL (CPU only); use --backend "
                "gloo, or build dtlab against a CUDA LibTorch (see docs/SETUP.md, A GPU node)");
  }
#endif
  if (!(flags.timeout_seconds > 0)) throw Error("--timeout must be positive");
  s.timeout = std::chrono::milliseconds(static_cast<long>(flags.timeout_seconds * 1000));
  s.interface = flags.interface;

  // The first launcher whose rank variable is set speaks for the environment.
  const Launcher* launcher = nullptr;
  for (const Launcher& l : kLaunchers) {
    if (find(env, l.rank)) {
      launcher = &l;
      break;
    }
  }
  std::optional<int> env_rank, env_world, env_local_rank, env_port;
  std::optional<std::string> env_master;
  std::string rank_var = "RANK", world_var = "WORLD_SIZE", master_var = "MASTER_ADDR";
  if (launcher) {
    rank_var = launcher->rank;
    world_var = launcher->world;
    env_rank = parse_int(*find(env, launcher->rank), launcher->rank);
    if (auto* w = find(env, launcher->world)) env_world = parse_int(*w, launcher->world);
    if (auto* l = find(env, launcher->local_rank)) env_local_rank = parse_int(*l, launcher->local_rank);
    // MASTER_ADDR wins over a launcher's own guess (Slurm's launch node).
    if (auto* m = find(env, "MASTER_ADDR")) {
      env_master = *m;
    } else if (auto* m2 = find(env, launcher->master_addr)) {
      env_master = *m2;
      master_var = launcher->master_addr;
    }
    s.source = launcher->name;
  } else if (auto* m = find(env, "MASTER_ADDR")) {
    env_master = *m;
  }
  if (auto* p = find(env, "MASTER_PORT")) env_port = parse_int(*p, "MASTER_PORT");

  const auto rank = merge(flags.rank, "--local_rank", env_rank, rank_var);
  const auto world = merge(flags.world_size, "--world_size", env_world, world_var);
  const auto master = merge(flags.master_ip, "--master_ip", env_master, master_var);
  const auto port = merge(flags.master_port, "--master_port", env_port, std::string("MASTER_PORT"));
  if (!launcher && (flags.rank || flags.world_size)) s.source = "flags";

  s.world_size = world.value_or(1);
  s.rank = rank.value_or(0);
  s.local_rank = env_local_rank;
  if (master) s.master_addr = *master;
  if (port) s.master_port = *port;

  if (auto* agent = find(env, "TORCHELASTIC_USE_AGENT_STORE")) s.use_agent_store = *agent == "True";
  if (auto* restarts = find(env, "TORCHELASTIC_RESTART_COUNT")) {
    s.restart_count = parse_int(*restarts, "TORCHELASTIC_RESTART_COUNT");
  }

  const std::string world_from = flags.world_size ? "--world_size" : world_var;
  const std::string port_from = flags.master_port ? "--master_port" : "MASTER_PORT";
  if (s.world_size < 1) throw Error(world_from + " must be at least 1, got " + std::to_string(s.world_size));
  if (s.rank < 0 || s.rank >= s.world_size) {
    throw Error("rank " + std::to_string(s.rank) + " (--local_rank or " + rank_var +
                ") is outside 0.." + std::to_string(s.world_size - 1) + " for world size " +
                std::to_string(s.world_size));
  }
  if (s.master_port < 1 || s.master_port > 65535) {
    throw Error(port_from + " " + std::to_string(s.master_port) + " is outside 1..65535");
  }
  if (s.world_size > 1 && !master) {
    throw Error("a run of " + std::to_string(s.world_size) +
                " ranks needs the master's address: give --master_ip (or MASTER_ADDR)");
  }
  return s;
}

}  // namespace dtlab::dist
