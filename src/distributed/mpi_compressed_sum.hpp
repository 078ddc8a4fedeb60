#pragma once
// The gradient sum between nodes in bfloat16 (reduce.compress "bf16"), private to
// distributed/. See Note [bf16 between nodes] in mpi_compressed_sum.cpp.
//
// Non-blocking, in two collectives per sum: start() posts the first, advance() posts the
// second once the first has arrived, wait() finishes. Sums are started, advanced and
// waited for in the same order on every rank.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mpiddp::distributed {

class CompressedSum {
 public:
  // Collective over comm (duplicates it twice: one communicator per phase keeps each
  // one's collectives in the same order on every rank, Note [bf16 between nodes]).
  explicit CompressedSum(MPI_Comm comm);
  ~CompressedSum();
  CompressedSum(const CompressedSum&) = delete;
  CompressedSum& operator=(const CompressedSum&) = delete;

  // Starts the sum over comm of data: (count) floats, in place, times scale. Returns its
  // handle. data must stay untouched until wait().
  int start(float* data, size_t count, double scale);
  // Lets sum `handle` advance; true when its first phase is over (the second is posted).
  bool advance(int handle);
  // Finishes every sum up to `handle`: afterwards data holds the scaled sum, rounded to
  // bf16 and widened back, bit-identical on every rank.
  void wait(int handle);
  // Every started sum has been waited for: handles start from 0 again, buffers are kept.
  void release_all() { started_ = 0; }

 private:
  struct Slot;
  void finish_phase_one(Slot& slot);
  Slot& slot(int handle);

  MPI_Comm scatter_ = MPI_COMM_NULL, gather_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::vector<Slot> slots_;  // reused step after step: nothing allocated once warm
  size_t started_ = 0;
};

}  // namespace mpiddp::distributed
