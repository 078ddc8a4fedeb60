#include "mpiddp/dist/launcher.hpp"

#include <cstdlib>

namespace mpiddp::dist {

std::string detect_launcher(const EnvLookup& getenv) {
  const auto set = [&](const char* name) { return getenv(name) != nullptr; };
  // Checked in this order because mpirun inside a Slurm allocation starts its daemons with
  // srun, so its ranks see SLURM_STEP_ID as well: the MPI launchers' own variables win.
  if (set("OMPI_COMM_WORLD_SIZE") || set("OMPI_MCA_orte_hnp_uri")) return "mpirun";  // Open MPI
  if (set("MPI_LOCALNRANKS")) return "mpirun";  // MPICH's Hydra (mpiexec, mpirun)
  if (set("SLURM_STEP_ID") || set("SLURM_STEPID")) return "srun";
  return "none";
}

std::string detect_launcher() {
  return detect_launcher([](const char* name) -> const char* { return std::getenv(name); });
}

}  // namespace mpiddp::dist
