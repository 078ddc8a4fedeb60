#pragma once
// The one helper every MPI call of dist/ goes through (defined in mpi_communicator.cpp).
namespace mpiddp::dist {

// Returns when code is MPI_SUCCESS; otherwise says which call failed on which rank and
// what to check, then ends the job.
void check_mpi(int code, const char* call);

}  // namespace mpiddp::dist
