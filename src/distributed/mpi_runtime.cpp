#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

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

// Note [a bounded MPI_Finalize]
// MPICH 4.0's ch4:ucx finalize (Debian 12 ships 4.0.2) closes every UCX endpoint, waits for
// their flushes, and only then enters a PMI barrier. A flush towards another node (tcp) can
// need an answer from the peer, and a peer whose own flushes are done is already in that
// barrier, where it no longer answers: the rank waits forever and the peers wait for it
// (on launch/local-cluster, 2 nodes x 2 ranks: 2 of 10 runs of a plain allreduce program,
// and 2 of 4 mpiddp jobs of cluster_sbatch, hung there; each time a rank spinning in UCX
// progress, the others in the PMI barrier).
// MPICH later moved the barrier before the disconnect (upstream commits 08d8105, d6c7cd5).
// By then the run is over on every rank: logs and checkpoints written and closed, the exit
// code agreed. So a finalize that has not returned within kFinalizeBound ends the process
// with the run's exit code, after saying so; one that returns (always, under Open MPI) costs
// a thread start.
namespace {
constexpr std::chrono::seconds kFinalizeBound{10};
}

int MpiRuntime::finish(int exit_code) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fflush(nullptr);  // std::_Exit below does not flush
  std::mutex mutex;
  std::condition_variable returned_cv;
  bool returned = false;
  std::thread guard([&] {
    std::unique_lock lock(mutex);
    if (returned_cv.wait_for(lock, kFinalizeBound, [&] { return returned; })) return;
    std::fprintf(stderr,
                 "rank %d: mpiddp: warning: MPI_Finalize has not returned in %lld s (the run "
                 "itself is complete; MPICH 4.0 over tcp can wait forever here, see "
                 "docs/reliability.md): exiting with code %d\n",
                 rank, static_cast<long long>(kFinalizeBound.count()), exit_code);
    std::fflush(stderr);
    std::_Exit(exit_code);
  });
  MPI_Finalize();
  {
    std::lock_guard lock(mutex);
    returned = true;
  }
  returned_cv.notify_one();
  guard.join();
  return exit_code;
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace mpiddp::distributed
