#pragma once
#include <memory>

#include "mpiddp/distributed/communicator.hpp"

namespace mpiddp::distributed {

class SharedMemorySum;  // src/distributed/mpi_shared_memory_sum.hpp: keeps <mpi.h> out of this header
class MpiWatchdog;
class CompressedSum;
class ScatteredSum;

// Communicator over MPI_COMM_WORLD (or a duplicate of it). Every MPI call is checked
// through one helper that names the call and what to do next.
class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator();
  ~MpiCommunicator() override;  // stops the watchdog
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allreduce_sum(float* data, size_t count) override;
  void allreduce_sum(double* data, size_t count) override;
  void allreduce_max(double* data, size_t count) override;
  void broadcast(void* data, size_t bytes, int root) override;
  std::vector<uint64_t> allgather(uint64_t value) override;
  std::vector<std::string> allgather_string(const std::string& value) override;
  void barrier() override;
  int ranks_on_node() const override;
  ReduceAlgorithm resolve(ReduceAlgorithm algorithm) const override;
  int start_sum(void* data, size_t count, ElementType type, double scale,
                ReduceAlgorithm algorithm, Compression compress) override;
  void sum_fixed_point(int64_t* sums, size_t count, const kernels::FixedPointGroups& groups, void* out,
                       ElementType out_type, ReduceAlgorithm algorithm) override;
  void* allocate_shared_buffer(size_t bytes) override;
  void* share_on_node(const void* data, size_t bytes) override;
  int node_rank() const override;
  int world_part() const override;
  bool node_parts_usable() const override;
  void allgather_node_parts(void* data, const std::vector<size_t>& begins) override;
  void gather_node_parts(const void* part, void* whole, const std::vector<size_t>& begins) override;
  void broadcast_among_nodes(void* data, size_t bytes) override;
  void allgather_world_parts(void* data, const std::vector<size_t>& begins) override;
  void gather_world_parts(const void* part, void* whole, const std::vector<size_t>& begins) override;
  int start_scattered_sum(void* data, ElementType type, double scale,
                          const std::vector<size_t>& begins) override;
  int start_gather(void* data, const std::vector<size_t>& begins) override;
  void wait_gather(int handle) override;
  void progress() override;
  void wait_sum(int handle) override;
  SumsFinite take_sums_finite() override;
  void start_watchdog(double timeout_s, bool abort_job) override;
  void publish_step(int64_t step) override;
  void set_flight_file(const std::string& path) override;
  [[noreturn]] void abort(int exit_code, const std::string& message) override;
  std::string library_version() const override;
  std::string host_name() const override;

 private:
  int rank_ = 0, size_ = 1;
  std::unique_ptr<SharedMemorySum> shared_;
  std::unique_ptr<CompressedSum> compressed_;  // the kMpi path's bf16 sums over the world
  std::unique_ptr<ScatteredSum> scattered_;    // start_scattered_sum's reduce-scatters
  // Started sums, by handle (defined in the .cpp: it holds an MPI_Request).
  struct PendingSum;
  std::vector<PendingSum> pending_;
  // (ranks on the node) the node parts' counts and offsets as MPI wants them, kept so that
  // the step's allgather allocates nothing (mpi_node_parts.cpp).
  std::vector<int> part_counts_, part_offsets_;
  std::vector<int> part_of_rank_;     // (size_) each world rank's world_part()
  // start_gather's, by handle (defined in the .cpp); kept, so that a step's gathers allocate
  // nothing once the first step has made as many as are ever in flight.
  struct PendingGather;
  std::vector<PendingGather> gathers_;
  // What the sums waited for since take_sums_finite last ran saw of their values.
  bool sums_waited_ = false, sums_unchecked_ = false, sums_not_finite_ = false;
  std::unique_ptr<MpiWatchdog> watchdog_;  // tracks every collective, see mpi_watchdog.hpp
};

// MPI_Init on construction (asking for MPI_THREAD_MULTIPLE, which the watchdog thread uses
// to answer its peers; it works with less), MPI_Finalize on destruction (unless MPI was aborted).
class MpiRuntime {
 public:
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();
  // MPI_Finalize at the end of a run whose exit code is `exit_code`, bounded (Note [a bounded
  // MPI_Finalize] in mpi_runtime.cpp): a finalize that has not returned in 10 s ends the
  // process with that code. Every MPI object must be gone. Returns exit_code.
  int finish(int exit_code);
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;
};

}  // namespace mpiddp::distributed
