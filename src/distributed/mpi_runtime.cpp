#include <mpi.h>

#include <cstdio>
#include <cstdlib>

#include "mpiddp/distributed/mpi_communicator.hpp"

namespace mpiddp::distributed {

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "mpiddp: MPI_Init_thread failed; is the MPI installation complete?\n");
    std::exit(1);
  }
  // Errors come back as return codes, so each call site can say what failed.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace mpiddp::distributed
