// resolve_settings: who this process is, from the assignment's flags or a launcher's
// environment (torchrun, Open MPI, Slurm), and the errors for conflicting or invalid values.
#include <gtest/gtest.h>

#include "dtlab/core/error.h"
#include "dtlab/dist/settings.h"
#include "test_util.h"

// Everything in a namespace named after the file (no anonymous namespace): the unit suites share
// one binary, compiled in groups of files (Note [Unity builds] in cmake/Dtlab.cmake), so helpers
// must not collide, and a TEST_F class must not derive from a type of an anonymous namespace.
namespace settings_test {

using dtlab::dist::Environment;
using dtlab::dist::LaunchFlags;
using dtlab::dist::resolve_settings;
using dtlab::dist::Settings;

LaunchFlags flags_for(int rank, int world, const std::string& master = "127.0.0.1", int port = 29600) {
  LaunchFlags f;
  f.rank = rank;
  f.world_size = world;
  f.master_ip = master;
  f.master_port = port;
  return f;
}

// ---------------------------------------------------------------------------------------------
// Sources

TEST(ResolveSettings, DefaultsAreOneProcess) {
  const Settings s = resolve_settings(LaunchFlags{}, Environment{});
  EXPECT_EQ(s.world_size, 1);
  EXPECT_EQ(s.rank, 0);
  EXPECT_FALSE(s.local_rank.has_value());
  EXPECT_EQ(s.master_addr, "127.0.0.1");
  EXPECT_EQ(s.master_port, dtlab::dist::kDefaultMasterPort);
  EXPECT_EQ(s.backend, "gloo");
  EXPECT_EQ(s.timeout, std::chrono::milliseconds(60000));
  EXPECT_FALSE(s.interface.has_value());
  EXPECT_EQ(s.source, "single process");

  // A master address alone does not make a launcher.
  const Settings t = resolve_settings(LaunchFlags{}, Environment{{"MASTER_ADDR", "127.0.0.1"}});
  EXPECT_EQ(t.world_size, 1);
  EXPECT_EQ(t.source, "single process");
}

TEST(ResolveSettings, FlagsOnly) {
  LaunchFlags f = flags_for(2, 4, "127.0.0.1", 29601);
  f.timeout_seconds = 7.5;
  f.interface = "lo";
  const Settings s = resolve_settings(f, Environment{});
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.world_size, 4);
  EXPECT_EQ(s.master_addr, "127.0.0.1");
  EXPECT_EQ(s.master_port, 29601);
  EXPECT_EQ(s.timeout, std::chrono::milliseconds(7500));
  EXPECT_EQ(s.interface, std::optional<std::string>("lo"));
  EXPECT_FALSE(s.local_rank.has_value());  // found at rendezvous
  EXPECT_EQ(s.source, "flags");
}

TEST(ResolveSettings, Torchrun) {
  const Environment env{{"RANK", "3"},
                        {"WORLD_SIZE", "4"},
                        {"LOCAL_RANK", "1"},
                        {"MASTER_ADDR", "127.0.0.1"},
                        {"MASTER_PORT", "29602"}};
  const Settings s = resolve_settings(LaunchFlags{}, env);
  EXPECT_EQ(s.rank, 3);
  EXPECT_EQ(s.world_size, 4);
  EXPECT_EQ(s.local_rank, std::optional<int>(1));
  EXPECT_EQ(s.master_addr, "127.0.0.1");
  EXPECT_EQ(s.master_port, 29602);
  EXPECT_EQ(s.source, "torchrun");
  EXPECT_FALSE(s.use_agent_store);
  EXPECT_EQ(s.restart_count, 0);
}

TEST(ResolveSettings, TorchrunAgentStoreAndRestartCount) {
  Environment env{{"RANK", "0"},
                  {"WORLD_SIZE", "2"},
                  {"MASTER_ADDR", "127.0.0.1"},
                  {"MASTER_PORT", "29608"},
                  {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                  {"TORCHELASTIC_RESTART_COUNT", "2"}};
  const Settings s = resolve_settings(LaunchFlags{}, env);
  EXPECT_TRUE(s.use_agent_store);
  EXPECT_EQ(s.restart_count, 2);
  env["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  EXPECT_FALSE(resolve_settings(LaunchFlags{}, env).use_agent_store);
  env["TORCHELASTIC_RESTART_COUNT"] = "two";
  EXPECT_THROW_WITH(resolve_settings(LaunchFlags{}, env), dtlab::Error, "TORCHELASTIC_RESTART_COUNT");
}

TEST(ResolveSettings, OpenMpi) {
  const Environment env{{"OMPI_COMM_WORLD_RANK", "1"},
                        {"OMPI_COMM_WORLD_SIZE", "2"},
                        {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                        {"MASTER_ADDR", "127.0.0.1"}};
  const Settings s = resolve_settings(LaunchFlags{}, env);
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.world_size, 2);
  EXPECT_EQ(s.local_rank, std::optional<int>(0));
  EXPECT_EQ(s.master_addr, "127.0.0.1");
  EXPECT_EQ(s.master_port, dtlab::dist::kDefaultMasterPort);
  EXPECT_EQ(s.source, "Open MPI");
}

TEST(ResolveSettings, OpenMpiWithoutMasterNeedsOne) {
  // Open MPI does not say where rank 0 is.
  const Environment env{{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}};
  EXPECT_THROW_WITH(resolve_settings(LaunchFlags{}, env), dtlab::Error, "--master_ip");
  LaunchFlags f;
  f.master_ip = "127.0.0.1";
  const Settings s = resolve_settings(f, env);
  EXPECT_EQ(s.master_addr, "127.0.0.1");
  EXPECT_EQ(s.source, "Open MPI");
}

TEST(ResolveSettings, SlurmTakesTheLaunchNodeAsMaster) {
  const Environment env{{"SLURM_PROCID", "5"},
                        {"SLURM_NTASKS", "8"},
                        {"SLURM_LOCALID", "1"},
                        {"SLURM_LAUNCH_NODE_IPADDR", "127.0.0.2"}};
  const Settings s = resolve_settings(LaunchFlags{}, env);
  EXPECT_EQ(s.rank, 5);
  EXPECT_EQ(s.world_size, 8);
  EXPECT_EQ(s.local_rank, std::optional<int>(1));
  EXPECT_EQ(s.master_addr, "127.0.0.2");
  EXPECT_EQ(s.source, "Slurm");
}

TEST(ResolveSettings, SlurmMasterAddrOverridesTheLaunchNode) {
  const Environment env{{"SLURM_PROCID", "0"},
                        {"SLURM_NTASKS", "2"},
                        {"SLURM_LOCALID", "0"},
                        {"SLURM_LAUNCH_NODE_IPADDR", "127.0.0.2"},
                        {"MASTER_ADDR", "127.0.0.3"},
                        {"MASTER_PORT", "29603"}};
  const Settings s = resolve_settings(LaunchFlags{}, env);
  EXPECT_EQ(s.master_addr, "127.0.0.3");
  EXPECT_EQ(s.master_port, 29603);
  EXPECT_EQ(s.source, "Slurm");
}

TEST(ResolveSettings, FlagsThatAgreeWithTheLauncherAreFine) {
  const Environment env{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                        {"MASTER_PORT", "29604"}};
  const Settings s = resolve_settings(flags_for(1, 2, "127.0.0.1", 29604), env);
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.world_size, 2);
  EXPECT_EQ(s.master_port, 29604);
  EXPECT_EQ(s.source, "torchrun");

  // And flags fill in what the launcher leaves out.
  LaunchFlags f;
  f.master_port = 29605;
  f.master_ip = std::string("127.0.0.1");
  const Settings t = resolve_settings(f, Environment{{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  EXPECT_EQ(t.master_addr, "127.0.0.1");
  EXPECT_EQ(t.master_port, 29605);
  EXPECT_EQ(t.source, "torchrun");
}

// ---------------------------------------------------------------------------------------------
// Conflicts name both sides

TEST(ResolveSettings, ConflictsNameFlagAndVariable) {
  {
    LaunchFlags f;
    f.world_size = 4;
    const Environment env{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}};
    EXPECT_THROW_WITH(resolve_settings(f, env), dtlab::Error, "--world_size 4 conflicts with WORLD_SIZE=2");
  }
  {
    LaunchFlags f;
    f.rank = 1;
    const Environment env{{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                          {"MASTER_ADDR", "127.0.0.1"}};
    EXPECT_THROW_WITH(resolve_settings(f, env), dtlab::Error,
                      "--local_rank 1 conflicts with OMPI_COMM_WORLD_RANK=0");
  }
  {
    const Environment env{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},
                          {"SLURM_LAUNCH_NODE_IPADDR", "127.0.0.2"}};
    LaunchFlags f;
    f.master_ip = std::string("127.0.0.1");
    EXPECT_THROW_WITH(resolve_settings(f, env), dtlab::Error,
                      "--master_ip 127.0.0.1 conflicts with SLURM_LAUNCH_NODE_IPADDR=127.0.0.2");
  }
  {
    LaunchFlags f;
    f.master_port = 29606;
    const Environment env{{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "29607"}};
    EXPECT_THROW_WITH(resolve_settings(f, env), dtlab::Error,
                      "--master_port 29606 conflicts with MASTER_PORT=29607");
  }
}

// ---------------------------------------------------------------------------------------------
// Invalid values name the flag or variable

TEST(ResolveSettings, RankOutOfRange) {
  EXPECT_THROW_WITH(resolve_settings(flags_for(4, 4), Environment{}), dtlab::Error, "--local_rank");
  EXPECT_THROW_WITH(resolve_settings(flags_for(-1, 4), Environment{}), dtlab::Error, "--local_rank");
  const Environment env{{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}};
  EXPECT_THROW_WITH(resolve_settings(LaunchFlags{}, env), dtlab::Error, "RANK");
  EXPECT_THROW_WITH(resolve_settings(LaunchFlags{}, env), dtlab::Error, "outside 0..1");
}

TEST(ResolveSettings, WorldSizeZero) {
  EXPECT_THROW_WITH(resolve_settings(flags_for(0, 0), Environment{}), dtlab::Error, "--world_size");
}

TEST(ResolveSettings, WorldSizeZeroFromTheLauncherNamesTheVariable) {
  const Environment env{{"RANK", "0"}, {"WORLD_SIZE", "0"}, {"MASTER_ADDR", "127.0.0.1"}};
  EXPECT_THROW_WITH(resolve_settings(LaunchFlags{}, env), dtlab::Error, "WORLD_SIZE");
  EXPECT_THROW_WITH(resolve_settings(LaunchFlags{}, env), dtlab::Error, "at least 1");
}

TEST(ResolveSettings, PortOutOfRange) {
  EXPECT_THROW_WITH(resolve_settings(flags_for(0, 2, "127.0.0.1", 70000), Environment{}), dtlab::Error,
                    "--master_port 70000");
  EXPECT_THROW_WITH(resolve_settings(flags_for(0, 2, "127.0.0.1", 0), Environment{}), dtlab::Error,
                    "--master_port");
}

TEST(ResolveSettings, PortOutOfRangeFromTheEnvironmentNamesTheVariable) {
  const Environment env{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                        {"MASTER_PORT", "70000"}};
  EXPECT_THROW_WITH(resolve_settings(LaunchFlags{}, env), dtlab::Error, "MASTER_PORT");
  EXPECT_THROW_WITH(resolve_settings(LaunchFlags{}, env), dtlab::Error, "70000");
}

TEST(ResolveSettings, UnknownBackend) {
  LaunchFlags f;
  f.backend = "mpi";
  EXPECT_THROW_WITH(resolve_settings(f, Environment{}), dtlab::Error, "--backend mpi");
  // nccl is a flag error at once when this LibTorch has no NCCL: no rank waits for the others.
  f.backend = "nccl";
#ifdef USE_C10D_NCCL
  EXPECT_EQ(resolve_settings(f, Environment{}).backend, "nccl");
#else
  EXPECT_THROW_WITH(resolve_settings(f, Environment{}), dtlab::Error, "built without NCCL");
#endif
}

TEST(ResolveSettings, NonPositiveTimeout) {
  LaunchFlags f;
  f.timeout_seconds = 0;
  EXPECT_THROW_WITH(resolve_settings(f, Environment{}), dtlab::Error, "--timeout");
  f.timeout_seconds = -3;
  EXPECT_THROW_WITH(resolve_settings(f, Environment{}), dtlab::Error, "--timeout");
}

TEST(ResolveSettings, SeveralRanksNeedAMaster) {
  LaunchFlags f;
  f.rank = 0;
  f.world_size = 2;
  EXPECT_THROW_WITH(resolve_settings(f, Environment{}), dtlab::Error, "--master_ip");
  EXPECT_THROW_WITH(resolve_settings(LaunchFlags{}, Environment{{"RANK", "1"}, {"WORLD_SIZE", "2"}}),
                    dtlab::Error, "MASTER_ADDR");
}

TEST(ResolveSettings, NonIntegerVariables) {
  EXPECT_THROW_WITH(resolve_settings(LaunchFlags{}, Environment{{"RANK", "one"}, {"WORLD_SIZE", "2"}}),
                    dtlab::Error, "RANK must be an integer, got \"one\"");
  EXPECT_THROW_WITH(resolve_settings(LaunchFlags{}, Environment{{"RANK", "0"}, {"WORLD_SIZE", "2x"}}),
                    dtlab::Error, "WORLD_SIZE must be an integer");
  EXPECT_THROW_WITH(resolve_settings(LaunchFlags{}, Environment{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", ""}}),
                    dtlab::Error, "SLURM_NTASKS");
  EXPECT_THROW_WITH(resolve_settings(LaunchFlags{}, Environment{{"MASTER_PORT", "http"}}), dtlab::Error,
                    "MASTER_PORT");
}

// Desync detection: the flag, or the variable as PyTorch's TORCH_DISTRIBUTED_DEBUG is set.
TEST(ResolveSettings, DistributedDebugFromTheFlagOrTheEnvironment) {
  LaunchFlags f;
  EXPECT_FALSE(resolve_settings(f, Environment{}).check_collectives);
  EXPECT_TRUE(resolve_settings(f, Environment{{"DTLAB_DISTRIBUTED_DEBUG", "DETAIL"}}).check_collectives);
  EXPECT_TRUE(resolve_settings(f, Environment{{"DTLAB_DISTRIBUTED_DEBUG", "1"}}).check_collectives);
  EXPECT_FALSE(resolve_settings(f, Environment{{"DTLAB_DISTRIBUTED_DEBUG", "0"}}).check_collectives);
  EXPECT_THROW_WITH(resolve_settings(f, Environment{{"DTLAB_DISTRIBUTED_DEBUG", "yes please"}}), dtlab::Error,
                    "DTLAB_DISTRIBUTED_DEBUG=yes please");
  f.distributed_debug = true;
  EXPECT_TRUE(resolve_settings(f, Environment{}).check_collectives);
}

}  // namespace settings_test
