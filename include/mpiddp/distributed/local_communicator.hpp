#pragma once
#include "mpiddp/distributed/communicator.hpp"

namespace mpiddp::distributed {

// A world of one process: every collective leaves the data as it is.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allreduce_sum(float*, size_t) override {}
  void allreduce_sum(double*, size_t) override {}
  void allreduce_max(double*, size_t) override {}
  void broadcast(void*, size_t, int) override {}
  std::vector<uint64_t> allgather(uint64_t value) override { return {value}; }
  std::vector<std::string> allgather_string(const std::string& value) override { return {value}; }
  void barrier() override {}
  int ranks_on_node() const override { return 1; }
  ReduceAlgorithm resolve(ReduceAlgorithm) const override { return ReduceAlgorithm::kMpi; }
  void* allocate_shared_buffer(size_t) override { return nullptr; }
  void* share_on_node(const void*, size_t) override { return nullptr; }
  // A sum over one rank is the data itself; only the scale is applied.
  int start_sum(void* data, size_t count, ElementType type, double scale,
                ReduceAlgorithm algorithm, Compression compress) override;
  int node_rank() const override { return 0; }
  int world_part() const override { return 0; }
  bool node_parts_usable() const override { return true; }
  void allgather_node_parts(void*, const std::vector<size_t>&) override {}
  // The one part is the whole.
  void gather_node_parts(const void* part, void* whole, const std::vector<size_t>& begins) override;
  void broadcast_among_nodes(void*, size_t) override {}
  void allgather_world_parts(void*, const std::vector<size_t>&) override {}
  void gather_world_parts(const void* part, void* whole, const std::vector<size_t>& begins) override {
    gather_node_parts(part, whole, begins);
  }
  int start_scattered_sum(void* data, ElementType type, double scale,
                          const std::vector<size_t>& begins) override {
    return start_sum(data, begins.back(), type, scale, ReduceAlgorithm::kMpi, Compression::kNone);
  }
  int start_gather(void*, const std::vector<size_t>&) override { return -1; }  // one part: held already
  void wait_gather(int) override {}
  void progress() override {}
  void wait_sum(int) override {}
  void start_watchdog(double, bool) override {}  // nobody to wait for
  void publish_step(int64_t) override {}
  void set_flight_file(const std::string&) override {}  // no collective can hang
  [[noreturn]] void abort(int exit_code, const std::string& message) override;
  std::string library_version() const override { return "none"; }
  std::string host_name() const override;
};

}  // namespace mpiddp::distributed
