#include "mpiddp/distributed/launcher.hpp"

#include <cstdlib>
#include <string>

#include "mpiddp/core/error.hpp"

namespace mpiddp::distributed {

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

int launched_processes(const EnvLookup& getenv) {
  // A positive count, or 0 for an absent or unreadable variable.
  const auto count = [&](const char* name) {
    const char* text = getenv(name);
    if (text == nullptr) return 0;
    char* end = nullptr;
    const long n = std::strtol(text, &end, 10);
    return *text != '\0' && *end == '\0' && n > 0 && n <= 1 << 24 ? static_cast<int>(n) : 0;
  };
  const std::string launcher = detect_launcher(getenv);
  if (launcher == "mpirun") return count("OMPI_COMM_WORLD_SIZE") + count("PMI_SIZE");  // one is set
  if (launcher == "srun") return count("SLURM_STEP_NUM_TASKS");
  return 0;
}

int launched_processes() {
  return launched_processes([](const char* name) -> const char* { return std::getenv(name); });
}

void check_world_size(int launched, int world_size) {
  // See Note [a launcher that does not match the MPI library].
  if (launched <= 1 || world_size != 1) return;
  throw Error(kExitConfig,
              "the launcher started " + std::to_string(launched) +
                  " processes, but MPI sees a world of 1: the launcher does not match the MPI "
                  "library mpiddp was built with, so each process would train alone. Under "
                  "srun use --mpi=pmix for Open MPI or --mpi=pmi2 for MPICH; with mpirun use "
                  "the one of the same MPI (mpirun.openmpi, mpiexec.mpich)",
              Scope::kEveryRank);
}

}  // namespace mpiddp::distributed
