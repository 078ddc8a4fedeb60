#pragma once
// The communication interface the trainer sees. MpiCommunicator implements it over MPI;
// LocalCommunicator is the one-process implementation (every collective is the identity),
// so model, optimizer and trainer tests need no launcher.
//
// This header is MPI-free on purpose: only src/distributed/mpi_*.cpp include <mpi.h>.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mpiddp/distributed/compression.hpp"
#include "mpiddp/kernels/fixed_point.hpp"

namespace mpiddp::distributed {

// kInt64: the deterministic mode's fixed-point sums (distributed/exact_sum.hpp); integer
// addition is associative, so every path and order gives the same bits. Its scale must be 1.
enum class ElementType { kFloat32, kFloat64, kInt64 };
// The element type of float or double values.
template <typename T>
constexpr ElementType element_type_of() {
  return sizeof(T) == 4 ? ElementType::kFloat32 : ElementType::kFloat64;
}

// What a rank saw of its sums' values (Communicator::take_sums_finite).
enum class SumsFinite { kUnchecked, kFinite, kNotFinite };

// How start_sum combines the ranks' buffers.
//   kMpi: MPI_Iallreduce on the world communicator; with one rank on every node, a sum of
//         even parts, each by its owner in rank order, and a gather (Note [the allreduce as a
//         scattered sum and a gather] in src/distributed/mpi_scattered_sum.cpp).
//   kShm: through MPI-3 shared memory within each node (each rank sums one slice of all the
//         node's buffers), then an allreduce of each slice among the nodes.
//   kAuto: kShm when more than one rank shares a node and every node has as many ranks,
//          otherwise kMpi.
enum class ReduceAlgorithm { kAuto, kMpi, kShm };

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In-place element-wise sum over all ranks; every rank ends with the same result.
  virtual void allreduce_sum(float* data, size_t count) = 0;
  virtual void allreduce_sum(double* data, size_t count) = 0;
  // In-place element-wise maximum over all ranks.
  virtual void allreduce_max(double* data, size_t count) = 0;
  // Copies root's bytes to every rank.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // Gathers one value from each rank, in rank order, on every rank.
  virtual std::vector<uint64_t> allgather(uint64_t value) = 0;
  // Gathers one string (any bytes, any length, may differ per rank) from each rank, in
  // rank order, on every rank.
  virtual std::vector<std::string> allgather_string(const std::string& value) = 0;
  virtual void barrier() = 0;

  // Ranks that share this rank's node (its shared-memory domain), this one included.
  virtual int ranks_on_node() const = 0;
  // What kAuto means for this job; kShm when shared memory cannot serve it throws
  // ConfigError("reduce.algorithm", ...).
  virtual ReduceAlgorithm resolve(ReduceAlgorithm algorithm) const = 0;
  // Starts an in-place sum over all ranks of data: (count) elements of `type`, then multiplies
  // every element by `scale` in the backend's last pass over the data: the caller decides the
  // factor (Note [why divide by the world size here] in gradient_reducer.cpp). Every rank must
  // start the same sums, with the same counts, in the same order. Returns a handle for wait_sum.
  // compress kBf16 (float32 data only): the part of the sum that crosses between nodes
  // travels in bfloat16 (Note [bf16 between nodes] in src/distributed/mpi_compressed_sum.cpp):
  // on kShm the sum among the nodes' slices, on kMpi the whole allreduce.
  virtual int start_sum(void* data, size_t count, ElementType type, double scale,
                        ReduceAlgorithm algorithm, Compression compress) = 0;
  // The deterministic mode's int64 sums over all ranks, turned into values at once:
  // out[i] = the sum over ranks of sums[i], converted by fixed_point_to_values (fixed_point.hpp),
  // i < count; out_type kFloat32 or kFloat64. sums may be left overwritten. Every rank gets
  // the same bits on every path. Here: start_sum, wait_sum, then the conversion; kShm,
  // when both buffers lie in shared windows, sums a slice per rank and writes it converted
  // into every rank's `out` (Note [the fixed-point sum converted in place] in
  // src/distributed/mpi_shared_memory_sum.cpp). Collective.
  virtual void sum_fixed_point(int64_t* sums, size_t count, const kernels::FixedPointGroups& groups, void* out,
                               ElementType out_type, ReduceAlgorithm algorithm);
  // Memory for a buffer that start_sum(kShm) then sums where it lies, with no copy in or
  // out: this rank's part of memory the node's ranks share (Note [gradients in the shared
  // window] in src/distributed/mpi_shared_memory_sum.cpp). Collective: every rank asks for the same
  // size, in the same order. Null when nothing is shared (one rank per node, or kShm
  // unusable): the caller then keeps its own memory. It lives as long as the communicator.
  virtual void* allocate_shared_buffer(size_t bytes) = 0;
  // One copy of `bytes` at `data` for the whole node, read by every rank of the node at the
  // returned address (Note [parameters once per node] in
  // src/distributed/mpi_shared_memory_sum.cpp). It holds node rank 0's bytes. A rank writes
  // only its own part of it (allgather_node_parts then ends the writes), and broadcast()
  // into it takes every node's copy to world rank 0's. Collective over the world; null
  // where no memory is shared (as allocate_shared_buffer). It lives as long as the
  // communicator.
  virtual void* share_on_node(const void* data, size_t bytes) = 0;
  // The collectives of the optimizer shard (reduce.shard_optimizer, Note [the optimizer
  // sharded across a node] in src/optim/optimizer.cpp). They work on parts: node rank
  // r owns bytes [begins[r], begins[r + 1]) of a buffer; begins: (ranks_on_node() + 1), the
  // same on every node (every node has as many ranks, or node_parts_usable() is false).
  //
  // This rank's number among the ranks of its node, 0 .. ranks_on_node() - 1.
  virtual int node_rank() const = 0;
  // Every node has as many ranks, so that the parts pair up among the nodes.
  virtual bool node_parts_usable() const = 0;
  // In place: each rank holds its own part of data; afterwards every rank of the node holds
  // every part. Collective over the world (each node exchanges within itself; for a node
  // copy, share_on_node, only a node barrier: the parts are already where every rank reads).
  virtual void allgather_node_parts(void* data, const std::vector<size_t>& begins) = 0;
  // Each rank of world rank 0's node sends its part (bytes begins[r + 1] - begins[r] at
  // `part`); rank 0 receives them all into `whole` (elsewhere null). Collective over that
  // node only: the other nodes' ranks return at once (their parts are the same).
  virtual void gather_node_parts(const void* part, void* whole,
                                 const std::vector<size_t>& begins) = 0;
  // Copies the bytes of the rank with this node rank on world rank 0's node to the ranks
  // with the same node rank on every other node. Collective over the world.
  virtual void broadcast_among_nodes(void* data, size_t bytes) = 0;
  // The same two collectives for parts cut among every rank of the world: rank r owns part
  // world_part() (reduce.shard_optimizer across the world: the nodes' exchange is a
  // reduce-scatter and an allgather; Note [the optimizer sharded across the world] in
  // src/optim/optimizer.cpp). begins: (size() + 1).
  // allgather_world_parts: collective over the world; with several ranks on each node, data
  // must be a node copy (share_on_node). gather_world_parts: rank 0 receives every part
  // into `whole` (elsewhere null); collective over the world.
  //
  // This rank's part of a buffer cut among the world: with one rank per node its world
  // rank; with several, node rank s owns part s * nodes + n, n its place among the ranks of
  // node rank s in world order, so that a node rank's parts lie side by side (Note [the scattered sum on a node] in
  // src/distributed/mpi_node_scattered_sum.cpp).
  virtual int world_part() const = 0;
  virtual void allgather_world_parts(void* data, const std::vector<size_t>& begins) = 0;
  virtual void gather_world_parts(const void* part, void* whole,
                                  const std::vector<size_t>& begins) = 0;
  // The reduce-scatter of the nodes' exchange: like start_sum (no compression), but rank r
  // ends with only its part p = world_part(), elements [begins[p], begins[p + 1]) of data,
  // summed over the ranks and scaled; the rest of data is left undefined. begins: (size() + 1)
  // element offsets, begins[0] = 0, begins.back() = the count; it must stay alive and
  // unchanged until wait_sum. With one rank per node each part is summed by its owner in
  // rank order (Note [the scattered sum] in src/distributed/mpi_scattered_sum.cpp); with
  // several, data must lie in a shared buffer (allocate_shared_buffer): the node sums first,
  // in node-rank order, then the owner among the nodes in node order (Note [the scattered sum
  // on a node]). Either way the bits do not depend on the MPI library.
  // Every rank must start the same scattered sums, in the same order, among its start_sums.
  virtual int start_scattered_sum(void* data, ElementType type, double scale,
                                  const std::vector<size_t>& begins) = 0;

  // reduce.shard "parameters" (ZeRO-3): a unit's parameters gathered from their owners'
  // parts (Note [parameters gathered by unit] in train/sharded_parameters_step.hpp). In place:
  // rank r holds part p = world_part(), bytes [begins[p], begins[p + 1]) of data; once waited
  // for, every rank holds every part. Non-blocking, so that the next unit's parameters travel
  // while one computes; begins (size() + 1, in bytes) must stay alive and unchanged until
  // wait_gather. Every rank starts the same gathers in the same order among its collectives.
  // Returns a handle for wait_gather (-1 with one rank: nothing to do).
  virtual int start_gather(void* data, const std::vector<size_t>& begins) = 0;
  virtual void wait_gather(int handle) = 0;
  // Lets started sums advance without blocking: MPI progresses non-blocking collectives
  // only inside MPI calls, so the trainer calls this between layers of the backward pass.
  virtual void progress() = 0;
  // Waits for a started sum. Afterwards its data holds the scaled sum, bit-identical on
  // every rank. Handles are valid until every started sum has been waited for.
  virtual void wait_sum(int handle) = 0;
  // Whether the sums waited for since the last call came out finite where this rank computed
  // them, and starts over (Note [the finite check in the sum] in mpi_shared_memory_sum.cpp).
  // A backend can tell where it passes over the values anyway: kShm with the buffer in the
  // node's shared window (each element computed once, on one rank), uncompressed kMpi (each
  // rank scales its whole copy, or sums its part among nodes of one rank). The answer is kUnchecked alike on every rank when a sum
  // could not tell, and no sum at all is kUnchecked too.
  virtual SumsFinite take_sums_finite() { return SumsFinite::kUnchecked; }
  // Ends every rank of the job: prints "rank R: message" and never returns.
  [[noreturn]] virtual void abort(int exit_code, const std::string& message) = 0;

  // The collective watchdog (Note [the watchdog] in src/distributed/mpi_watchdog.cpp): when this
  // rank waits in one collective longer than timeout_s, it reports which ranks have not
  // arrived and the step each one is at, then ends the job (abort_job) or only warns.
  // Local (the side channel was set up with the communicator); may be called again to
  // change the timeout and the action. timeout_s = 0: off.
  virtual void start_watchdog(double timeout_s, bool abort_job) = 0;
  // Makes this rank's current step known to the watchdog's reports. Cheap: call every step.
  virtual void publish_step(int64_t step) = 0;
  // Where this rank's flight recorder file goes (Note [the flight recorder] in
  // src/distributed/flight_recorder.cpp): written on a watchdog report, an abort or a
  // terminating signal. "" writes none. Local.
  virtual void set_flight_file(const std::string& path) = 0;

  // The MPI library's version line ("Open MPI v4.1.4, ..."), or "none" for one process.
  virtual std::string library_version() const = 0;
  // The host this rank runs on.
  virtual std::string host_name() const = 0;
};

}  // namespace mpiddp::distributed
