#pragma once
// Which launcher started this process, for the run record. Only informative: rank and size
// always come from MPI, never from these variables.
#include <functional>
#include <string>

namespace mpiddp::distributed {

// Reads an environment variable: null when unset (std::getenv by default).
using EnvLookup = std::function<const char*(const char*)>;

// "mpirun" (Open MPI's mpirun/mpiexec, MPICH's Hydra mpiexec, also inside a Slurm
// allocation), "srun" (Slurm launched the ranks directly) or "none" (started without a
// launcher: a one-process run). Call it before MPI_Init: some MPI libraries set launcher-
// looking variables during initialisation.
std::string detect_launcher(const EnvLookup& getenv);
std::string detect_launcher();

// How many processes the launcher says it started (OMPI_COMM_WORLD_SIZE, Hydra's PMI_SIZE,
// srun's SLURM_STEP_NUM_TASKS, in the order of detect_launcher), or 0 when none says.
// Read before MPI_Init, like detect_launcher: a singleton sets OMPI_COMM_WORLD_SIZE=1.
int launched_processes(const EnvLookup& getenv);
int launched_processes();

// Note [a launcher that does not match the MPI library]: srun with the wrong --mpi plugin,
// or one MPI's mpiexec starting another MPI's binary, starts N separate one-process MPI jobs.
// Each believes it is rank 0 of 1, trains alone and writes the same log: N runs that look
// right and are not. Throws a launch error (exit code 2, on every process) when the launcher
// started more than one process but MPI sees a world of one.
void check_world_size(int launched, int world_size);

}  // namespace mpiddp::distributed
