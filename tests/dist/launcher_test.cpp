#include "mpiddp/dist/launcher.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace mpiddp::dist {
namespace {

std::string launcher_with(const std::map<std::string, std::string>& env) {
  return detect_launcher([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
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

}  // namespace
}  // namespace mpiddp::dist
