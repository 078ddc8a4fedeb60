#pragma once
// The reduce-scatter of the optimizer sharded across the leaders (Communicator::
// start_scattered_sum), and the allreduce among nodes of one rank built from it
// (start_sum on kMpi), private to distributed/. See Note [the scattered sum] and Note [the
// allreduce as a scattered sum and a gather] in mpi_scattered_sum.cpp.
//
// Non-blocking, one MPI_Ialltoallv per sum: start() posts it, advance() tests it, wait()
// sums this rank's part. start_gathered() adds a second phase, an MPI_Iallgatherv of the
// owners' parts, which advance() posts once the first has arrived. Sums are started,
// advanced and waited for in the same order on every rank.
#include <mpi.h>

#include <cstddef>
#include <vector>

#include "mpiddp/distributed/communicator.hpp"

namespace mpiddp::distributed {

class ScatteredSum {
 public:
  // Collective over comm (duplicates it twice: the exchanges match nothing else).
  explicit ScatteredSum(MPI_Comm comm);
  ~ScatteredSum();
  ScatteredSum(const ScatteredSum&) = delete;
  ScatteredSum& operator=(const ScatteredSum&) = delete;

  // Starts the sum over comm of part r of data, [begins[r], begins[r + 1]) elements of
  // `type`, into rank r's data, times scale. data must stay untouched until wait().
  int start(void* data, ElementType type, double scale, const std::vector<size_t>& begins);
  // The whole sum into every rank's data: (count) elements of `type`, in place, times
  // scale, cut into even parts, each summed by its owner in rank order and then sent to
  // every rank. data must stay untouched until wait().
  int start_gathered(void* data, size_t count, ElementType type, double scale);
  // Lets sum `handle` advance; true when its exchange is over (a gathered sum: its first
  // phase, the second then posted).
  bool advance(int handle);
  // Finishes sum `handle`: this rank's part of data holds the scaled sum, added in rank
  // order; a gathered sum's data holds all of it. Returns whether the part this rank summed
  // came out finite (int64: always); every rank checks its own part only.
  bool wait(int handle);
  // Every started sum has been waited for: handles start from 0 again, buffers are kept.
  void release_all() { started_ = 0; }

 private:
  struct Slot;
  Slot& slot(int handle);
  // The next slot after those started (new or kept from an earlier step).
  size_t new_slot();
  void post(Slot& s, void* data, ElementType type, double scale, const std::vector<size_t>& begins);
  void finish_exchange(Slot& s);

  // One communicator per phase: a gathered sum's second phase may be posted on one rank
  // while the next sum's first is, and on another not yet (as in mpi_compressed_sum.cpp).
  MPI_Comm comm_ = MPI_COMM_NULL, gather_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::vector<Slot> slots_;  // reused step after step: nothing allocated once warm
  size_t started_ = 0;
};

}  // namespace mpiddp::distributed
