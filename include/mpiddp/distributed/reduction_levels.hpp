#pragma once
// What the gradient reduction does at each level of the machine, for the run record: inside
// a node (between the ranks that share memory) and between nodes. A pure function of the
// resolved algorithm and the job's shape, so it is tested without a launcher.
#include <string>
#include <vector>

#include "mpiddp/distributed/communicator.hpp"

namespace mpiddp::distributed {

struct ReductionLevels {
  int nodes = 1;           // distinct hosts of the job
  int ranks_per_node = 1;  // ranks sharing rank 0's node (its shared-memory domain)
  // "shm": each rank sums one slice of all the node's buffers in shared memory;
  // "mpi": the MPI library's allreduce over all ranks (its own transport inside a node);
  // "none": one rank per node, nothing to combine there.
  std::string within_node;
  // "mpi": between nodes through MPI (with "shm" inside: one allreduce per slice among the
  // ranks of equal node rank, ranks_per_node of them side by side; with the optimizer
  // sharded across the world, a reduce-scatter and an allgather of each node rank's run);
  // "none": one node.
  std::string between_nodes;
};

// algorithm: already resolved (kMpi or kShm); hosts: every rank's host in rank order.
ReductionLevels reduction_levels(ReduceAlgorithm algorithm, const std::vector<std::string>& hosts,
                                 int ranks_on_node);

}  // namespace mpiddp::distributed
