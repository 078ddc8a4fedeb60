#include "mpiddp/distributed/launcher.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "mpiddp/core/error.hpp"

namespace mpiddp::distributed {
namespace {

EnvLookup lookup_in(const std::map<std::string, std::string>& env) {
  return [&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

std::string launcher_with(const std::map<std::string, std::string>& env) {
  return detect_launcher(lookup_in(env));
}

int processes_with(const std::map<std::string, std::string>& env) {
  return launched_processes(lookup_in(env));
}

TEST(Launcher, FromTheLaunchersOwnVariables) {
  EXPECT_EQ(launcher_with({}), "none");
  EXPECT_EQ(launcher_with({{"OMPI_COMM_WORLD_SIZE", "2"}}), "mpirun");
  EXPECT_EQ(launcher_with({{"MPI_LOCALNRANKS", "2"}, {"PMI_FD", "6"}}), "mpirun");  // Hydra
  EXPECT_EQ(launcher_with({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "1"}}), "srun");
  // mpirun inside an allocation starts its daemons with srun: mpirun still wins.
  EXPECT_EQ(launcher_with({{"SLURM_STEP_ID", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}}), "mpirun");
  // A batch script's own environment (SLURM_JOB_ID, no step) is no launcher of ranks.
  EXPECT_EQ(launcher_with({{"SLURM_JOB_ID", "7"}}), "none");
}

TEST(Launcher, ProcessCountFromTheLauncherThatStartedUs) {
  EXPECT_EQ(processes_with({}), 0);
  EXPECT_EQ(processes_with({{"OMPI_COMM_WORLD_SIZE", "4"}}), 4);
  EXPECT_EQ(processes_with({{"MPI_LOCALNRANKS", "2"}, {"PMI_SIZE", "3"}}), 3);  // Hydra
  EXPECT_EQ(processes_with({{"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}}), 2);
  // mpirun inside an allocation: the ranks' count, not srun's count of mpirun's daemons.
  EXPECT_EQ(processes_with({{"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"},
                            {"OMPI_COMM_WORLD_SIZE", "8"}}),
            8);
  // A batch script's environment starts no ranks; unreadable counts say nothing.
  EXPECT_EQ(processes_with({{"SLURM_JOB_ID", "7"}, {"SLURM_NTASKS", "2"}}), 0);
  EXPECT_EQ(processes_with({{"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "two"}}), 0);
  EXPECT_EQ(processes_with({{"OMPI_COMM_WORLD_SIZE", ""}}), 0);
}

TEST(Launcher, WorldOfOneUnderAManyProcessLaunchIsALaunchError) {
  // srun -n 2 with a plugin the MPI library does not speak: each process sees a world of 1.
  try {
    check_world_size(2, 1);
    FAIL() << "expected a launch error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitConfig);
    EXPECT_TRUE(e.on_every_rank());
    EXPECT_NE(std::string(e.what()).find("started 2 processes, but MPI sees a world of 1"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(check_world_size(0, 1));  // no launcher: a singleton run
  EXPECT_NO_THROW(check_world_size(1, 1));
  EXPECT_NO_THROW(check_world_size(2, 2));
  EXPECT_NO_THROW(check_world_size(0, 4));  // a launcher that announces nothing
}

}  // namespace
}  // namespace mpiddp::distributed
