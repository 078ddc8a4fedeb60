#pragma once
// The helpers every MPI call and every abort of distributed/ go through (defined in
// mpi_communicator.cpp).
#include <mpi.h>

#include <cstddef>

namespace mpiddp::distributed {

// Returns when code is MPI_SUCCESS; otherwise says which call failed on which rank and
// what to check, then ends the job.
void check_mpi(int code, const char* call);

// Ends the whole job with exit_code after this rank has printed why on stderr. Every path
// that calls MPI_Abort goes through here, so that the message reaches the user first.
[[noreturn]] void abort_job(int exit_code);

// count as an MPI count (int), or an Error on every rank alike when it does not fit.
int mpi_count(size_t count, const char* call);

// MPI_Bcast of any number of bytes over comm: MPI counts are int, so in pieces of 1 GiB.
void broadcast_bytes(void* data, size_t bytes, int root, MPI_Comm comm, const char* call);

}  // namespace mpiddp::distributed
