#pragma once
// The one-node fast path of the gradient sum (ReduceAlgorithm::kShm), private to distributed/.
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
//
// A buffer that already lies in the shared memory (allocate_resident) is summed where it
// lies, with no copies (Note [gradients in the shared window]):               barrier
//   rank s sums slice s of every rank's buffer and writes the result into slice s of
//   every rank's buffer (across nodes: after the allreduce of the slice);    barrier
// so each byte crosses the memory bus about twice: read once, written once.
#include <mpi.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "mpiddp/distributed/communicator.hpp"

namespace mpiddp::distributed {

class CompressedSum;
class ScatteredSum;
// The MPI datatype of an element type (used by the communicator and the shared-memory sum).
MPI_Datatype mpi_type_of(ElementType type);

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
  // The node's communicators, for the optimizer shard's collectives (mpi_node_parts.cpp):
  // the ranks of this node, numbered by node_rank(); the ranks with this node rank, one per
  // node, in which first_node() is the one on world rank 0's node.
  MPI_Comm node() const { return node_; }
  MPI_Comm among_nodes() const { return cross_; }
  int node_rank() const { return local_rank_; }
  int first_node() const { return first_node_; }
  // How many nodes there are, and this rank's part of a buffer cut among every rank of the
  // world: node rank s, numbered n in among_nodes() (world order), owns part s * nodes() + n, so
  // that the parts of one node rank, one per node, lie side by side (Note [the scattered sum
  // on a node] in mpi_node_scattered_sum.cpp). With one rank per node, the world rank.
  int nodes() const { return nodes_; }
  int world_part() const { return local_rank_ * nodes_ + cross_rank_; }
  // This node rank's run of a buffer cut among the world by `begins` (world_part() order,
  // size + 1 offsets): returns where the run begins, and node_run_parts() then holds its
  // parts, one per node in among_nodes() order, as nodes() + 1 offsets from there.
  size_t node_run(const std::vector<size_t>& begins);
  const std::vector<size_t>& node_run_parts() const { return cross_begins_; }
  bool on_first_node() const { return on_first_node_; }
  // Every node has the same number of ranks (the cross-node step pairs slices up by
  // node-local rank).
  bool usable() const { return uniform_; }
  // Blocking, collective over world: data: (count) of type, in place.
  // compress kBf16: the step among the nodes in bfloat16 (mpi_compressed_sum.hpp).
  // Returns whether the slices this rank computed came out finite, when data lies in a
  // resident window (Note [the finite check in the sum]); kUnchecked otherwise.
  SumsFinite sum(void* data, size_t count, ElementType type, double scale,
                 Compression compress = Compression::kNone);

  // Communicator::start_scattered_sum with several ranks on each node, for data in a
  // resident window (allocate_resident): this rank's world part (world_part())
  // of data, [begins[p], begins[p + 1]) elements, ends summed over the world and scaled;
  // the rest of data is left undefined. Blocking, collective over world.
  void sum_scattered(void* data, ElementType type, double scale, const std::vector<size_t>& begins);

  // Whether sum_fixed_point can take these buffers: both lie in resident windows. Local.
  bool sums_fixed_point_in_place(const int64_t* sums, size_t count, const void* out, ElementType out_type) const;
  // Communicator::sum_fixed_point where sums_fixed_point_in_place. Blocking, collective over world.
  void sum_fixed_point(int64_t* sums, size_t count, const kernels::FixedPointGroups& groups, void* out,
                       ElementType out_type);

  // `bytes` of memory in a new window shared by the node, at the same offset in every
  // rank's segment, zeroed and faulted in. Collective over the node (every rank asks for
  // the same size, in the same order). It lives as long as this object.
  void* allocate_resident(size_t bytes);

  // Note [parameters once per node]. A copy of `bytes` at `data` that every rank of the
  // node reads at the returned address: node rank 0's segment of a new window, filled from
  // node rank 0's data, its pages faulted in by every rank. Collective over the node.
  void* share_on_node(const void* data, size_t bytes);
  // [data, data + bytes) lies in a node copy (share_on_node).
  bool in_node_copy(const void* data, size_t bytes) const;
  // After each rank has written its own part of a node copy: one node barrier, after which
  // every rank reads every part. Collective over the node.
  void end_node_copy_writes(const void* data, size_t bytes);
  // The node copy on world rank 0's node becomes every node's (node rank 0 of each node
  // takes part in one broadcast; then a node barrier). Collective over the world.
  void broadcast_node_copy(void* data, size_t bytes);

 private:
  struct Window {
    MPI_Win handle = MPI_WIN_NULL;
    size_t bytes = 0;              // of each segment
    // (local_size_) where each rank's segment starts, 64-byte aligned: the kernels' inputs
    // and outputs, as they are.
    std::vector<void*> segments;
  };
  // Every rank's segment holds `bytes`, or (only_node_rank0) node rank 0's alone.
  Window allocate_window(size_t bytes, bool only_node_rank0);
  static void free_window(Window& window);
  void reserve(size_t bytes);
  // The node's ranks meet, every write to the window (and to `second`) before it visible to
  // every read after it: MPI_Win_sync on both sides of the barrier.
  void node_barrier(MPI_Win window, MPI_Win second = MPI_WIN_NULL);
  // Copies `bytes` from `from` to byte `offset` of every other rank's segment of window.
  void store_in_other_segments(const Window& window, size_t offset, const void* from,
                               size_t bytes) const;
  // The window whose segment of this rank holds [data, data + bytes), or null.
  const Window* resident_window_of(const void* data, size_t bytes) const;
  // The node copy that holds [data, data + bytes), or null.
  const Window* node_copy_of(const void* data, size_t bytes) const;
  SumsFinite sum_resident(const Window& window, void* data, size_t count, ElementType type,
                          double scale, Compression compress);
  // Every rank's segment of `window` at data's offset in this rank's.
  void at_same_offset(const Window& window, const void* data, std::vector<void*>& segments) const;
  // The node's partial sum of one slice, summed among the nodes, then scaled; what the
  // scaling pass saw of the values (kUnchecked in bf16, or at scale 1).
  SumsFinite sum_across_nodes(void* slice, size_t count, ElementType type, double scale,
                              Compression compress);

  MPI_Comm node_ = MPI_COMM_NULL;   // the ranks of this node
  MPI_Comm cross_ = MPI_COMM_NULL;  // the ranks with this node-local rank, one per node
  std::unique_ptr<CompressedSum> compressed_;  // over cross_, when there are several nodes
  std::unique_ptr<ScatteredSum> scattered_;    // over cross_, when there are several nodes
  std::vector<size_t> cross_begins_;           // (nodes_ + 1) node_run()'s parts among the nodes
  int local_rank_ = 0, local_size_ = 1, nodes_ = 1, cross_rank_ = 0;
  int first_node_ = 0;          // in cross_: the rank on world rank 0's node
  bool on_first_node_ = true;   // this node holds world rank 0
  bool uniform_ = true;
  Window staging_;                  // for buffers outside the shared memory, in pieces
  std::vector<Window> resident_;    // from allocate_resident
  std::vector<Window> node_copies_; // from share_on_node: segments[0] is the copy
  // (local_size_) sum_fixed_point's segments, sized at construction: the step allocates nothing.
  std::vector<void*> fixed_in_, fixed_out_;
};

}  // namespace mpiddp::distributed
