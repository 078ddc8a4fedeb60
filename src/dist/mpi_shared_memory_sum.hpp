#pragma once
// The one-node fast path of the gradient sum (ReduceAlgorithm::kShm), private to dist/.
//
// The ranks of a node share one MPI-3 window with a segment per rank. To sum a buffer:
//   1. each rank copies its buffer into its own segment;               barrier
//   2. rank s sums slice s of all segments (in rank order) into slice s of segment s;
//      across nodes, the ranks with the same node-local rank allreduce that slice;
//      then the scale is applied;                                       barrier
//   3. every rank copies every slice back into its buffer.             barrier
// Each element is computed once, by one rank, so every rank ends with the same bits; each
// byte crosses the memory bus about four times (copy in, sum, copy out), against MPI's
// pipelined send/receive copies and temporaries.
#include <mpi.h>

#include <cstddef>
#include <vector>

#include "mpiddp/dist/communicator.hpp"

namespace mpiddp::dist {

class SharedMemorySum {
 public:
  // Splits world into nodes (MPI_Comm_split_type SHARED). For tests, the environment
  // variable MPIDDP_TEST_RANKS_PER_NODE=k splits each node further into groups of k ranks,
  // so the multi-node path can run on one machine.
  explicit SharedMemorySum(MPI_Comm world);
  ~SharedMemorySum();
  SharedMemorySum(const SharedMemorySum&) = delete;
  SharedMemorySum& operator=(const SharedMemorySum&) = delete;

  int ranks_on_node() const { return local_size_; }
  // Every node has the same number of ranks (the cross-node step pairs slices up by
  // node-local rank).
  bool usable() const { return uniform_; }
  // Blocking, collective over world: data: (count) of type, in place.
  void sum(void* data, size_t count, ElementType type, double scale);

 private:
  void reserve(size_t bytes);
  void node_barrier();

  MPI_Comm node_ = MPI_COMM_NULL;   // the ranks of this node
  MPI_Comm cross_ = MPI_COMM_NULL;  // the ranks with this node-local rank, one per node
  int local_rank_ = 0, local_size_ = 1, nodes_ = 1;
  bool uniform_ = true;
  MPI_Win window_ = MPI_WIN_NULL;
  size_t segment_bytes_ = 0;
  std::vector<char*> segments_;     // (local_size_) base of each rank's segment
};

}  // namespace mpiddp::dist
