// The optimizer shard's collectives (reduce.shard_optimizer): the parts of a buffer that
// the ranks of a node own, exchanged within the node or paired up among the nodes. The
// node and its numbering are the shared-memory sum's (mpi_shared_memory_sum.hpp), so a
// rank's part of the optimizer is the one its node rank names on every node. Cut among the
// world (the *_world_parts collectives), rank r owns part world_part(): with one rank per
// node its world rank; with several, node rank s on node n owns part s * nodes + n.
#include <mpi.h>

#include "mpi_check.hpp"
#include "mpi_shared_memory_sum.hpp"
#include "mpi_watchdog.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/distributed/mpi_communicator.hpp"

namespace mpiddp::distributed {

int MpiCommunicator::node_rank() const { return shared_->node_rank(); }

int MpiCommunicator::world_part() const { return shared_->world_part(); }

bool MpiCommunicator::node_parts_usable() const { return shared_->usable(); }

namespace {

// begins as MPI's int counts and offsets (bytes), into vectors sized once per node size:
// rank r's are those of part part_of_rank[r] (without part_of_rank, of part r).
void to_counts(const std::vector<size_t>& begins, std::vector<int>& counts,
               std::vector<int>& offsets, const char* call,
               const std::vector<int>* part_of_rank = nullptr) {
  const size_t parts = begins.size() - 1;
  counts.resize(parts);
  offsets.resize(parts);
  mpi_count(begins[parts], call);  // every offset then fits too
  for (size_t r = 0; r < parts; ++r) {
    const size_t p = part_of_rank ? static_cast<size_t>((*part_of_rank)[r]) : r;
    offsets[r] = static_cast<int>(begins[p]);
    counts[r] = static_cast<int>(begins[p + 1] - begins[p]);
  }
}

// In place: each rank of comm holds its part of data; afterwards every rank holds every part.
void allgather_parts(void* data, const std::vector<size_t>& begins, std::vector<int>& counts,
                     std::vector<int>& offsets, MPI_Comm comm, const char* call) {
  to_counts(begins, counts, offsets, call);
  check_mpi(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts.data(), offsets.data(),
                           MPI_BYTE, comm),
            call);
}

// Each rank's part of comm, at `part`, into `whole` on comm's rank 0 (see to_counts).
void gather_parts(const void* part, void* whole, int rank, const std::vector<size_t>& begins,
                  std::vector<int>& counts, std::vector<int>& offsets, MPI_Comm comm, const char* call,
                  const std::vector<int>* part_of_rank = nullptr) {
  to_counts(begins, counts, offsets, call, part_of_rank);
  check_mpi(MPI_Gatherv(part, counts[static_cast<size_t>(rank)], MPI_BYTE, whole, counts.data(),
                        offsets.data(), MPI_BYTE, 0, comm),
            call);
}

}  // namespace

void MpiCommunicator::allgather_node_parts(void* data, const std::vector<size_t>& begins) {
  if (begins.size() < 3) return;  // one rank on the node: it holds every part already
  InCollective scope(*watchdog_, Collective::kNodeAllgather, begins.back());
  // The node's one copy of the parameters (the shm path): each rank has written its part
  // where every rank reads it. Elsewhere (reduce.algorithm other than shm) MPI exchanges them.
  if (shared_->in_node_copy(data, begins.back())) {
    shared_->end_node_copy_writes(data, begins.back());
    return;
  }
  allgather_parts(data, begins, part_counts_, part_offsets_, shared_->node(),
                  "MPI_Allgatherv(within a node)");
}

void MpiCommunicator::gather_node_parts(const void* part, void* whole,
                                        const std::vector<size_t>& begins) {
  if (!shared_->on_first_node()) return;
  InCollective scope(*watchdog_, Collective::kNodeGather, begins.back());
  // World rank 0 is node rank 0 of its node: the split keeps world order.
  gather_parts(part, whole, shared_->node_rank(), begins, part_counts_, part_offsets_, shared_->node(),
               "MPI_Gatherv(within a node)");
}

void MpiCommunicator::allgather_world_parts(void* data, const std::vector<size_t>& begins) {
  if (begins.size() < 3) return;  // one rank: it holds every part already
  InCollective scope(*watchdog_, Collective::kWorldAllgather, begins.back());
  if (shared_->ranks_on_node() == 1) {
    allgather_parts(data, begins, part_counts_, part_offsets_, MPI_COMM_WORLD, "MPI_Allgatherv(world parts)");
    return;
  }
  // Several ranks on each node: data is the node's one copy (Note [parameters once per
  // node]). The parts of node rank s on every node lie side by side; the ranks of node rank
  // s exchange them among the nodes, each writing that run of its node's copy, and the node
  // barrier then lets every rank read every part.
  if (!shared_->in_node_copy(data, begins.back()))
    throw Error(kExitFailure, "parts cut among the world on nodes of several ranks must lie in the node's copy",
                Scope::kEveryRank);
  const size_t run = shared_->node_run(begins);
  allgather_parts(static_cast<char*>(data) + run, shared_->node_run_parts(), part_counts_, part_offsets_,
                  shared_->among_nodes(), "MPI_Allgatherv(world parts among nodes)");
  shared_->end_node_copy_writes(data, begins.back());
}

void MpiCommunicator::gather_world_parts(const void* part, void* whole,
                                         const std::vector<size_t>& begins) {
  InCollective scope(*watchdog_, Collective::kWorldGather, begins.back());
  gather_parts(part, whole, rank_, begins, part_counts_, part_offsets_, MPI_COMM_WORLD,
               "MPI_Gatherv(world parts)", &part_of_rank_);
}

void MpiCommunicator::broadcast_among_nodes(void* data, size_t bytes) {
  InCollective scope(*watchdog_, Collective::kBroadcastAmongNodes, bytes);
  check_mpi(MPI_Bcast(data, mpi_count(bytes, "MPI_Bcast(among nodes)"), MPI_BYTE,
                      shared_->first_node(), shared_->among_nodes()),
            "MPI_Bcast(among nodes)");
}

}  // namespace mpiddp::distributed
