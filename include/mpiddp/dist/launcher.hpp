#pragma once
// Which launcher started this process, for the run record. Only informative: rank and size
// always come from MPI, never from these variables.
#include <functional>
#include <string>

namespace mpiddp::dist {

// Reads an environment variable: null when unset (std::getenv by default).
using EnvLookup = std::function<const char*(const char*)>;

// "mpirun" (Open MPI's mpirun/mpiexec, MPICH's Hydra mpiexec, also inside a Slurm
// allocation), "srun" (Slurm launched the ranks directly) or "none" (started without a
// launcher: a one-process run). Call it before MPI_Init: some MPI libraries set launcher-
// looking variables during initialisation.
std::string detect_launcher(const EnvLookup& getenv);
std::string detect_launcher();

}  // namespace mpiddp::dist
