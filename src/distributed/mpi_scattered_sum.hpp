#pragma once
// The reduce-scatter of the optimizer sharded across the leaders (Communicator::
// start_scattered_sum), private to distributed/. See Note [the scattered sum] in
// mpi_scattered_sum.cpp.
//
// Non-blocking, one MPI_Ialltoallv per sum: start() posts it, advance() tests it, wait()
// sums this rank's part. Sums are started and waited for in the same order on every rank.
#include <mpi.h>

#include <cstddef>
#include <vector>

#include "mpiddp/distributed/communicator.hpp"

namespace mpiddp::distributed {

class ScatteredSum {
 public:
  // Collective over comm (duplicates it: the exchanges match nothing else).
  explicit ScatteredSum(MPI_Comm comm);
  ~ScatteredSum();
  ScatteredSum(const ScatteredSum&) = delete;
  ScatteredSum& operator=(const ScatteredSum&) = delete;

  // Starts the sum over comm of part r of data, [begins[r], begins[r + 1]) elements of
  // `type`, into rank r's data, times scale. data must stay untouched until wait().
  int start(void* data, ElementType type, double scale, const std::vector<size_t>& begins);
  // Lets sum `handle` advance; true when its exchange is over.
  bool advance(int handle);
  // Finishes sum `handle`: this rank's part of data holds the scaled sum, added in rank order.
  void wait(int handle);
  // Every started sum has been waited for: handles start from 0 again, buffers are kept.
  void release_all() { started_ = 0; }

 private:
  struct Slot;
  Slot& slot(int handle);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::vector<Slot> slots_;  // reused step after step: nothing allocated once warm
  size_t started_ = 0;
};

}  // namespace mpiddp::distributed
