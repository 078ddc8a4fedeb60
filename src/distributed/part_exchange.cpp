// The sharded optimizer's parts and their exchange over a communicator
// (include/mpiddp/distributed/part_exchange.hpp).
#include "mpiddp/distributed/part_exchange.hpp"

#include "mpiddp/distributed/communicator.hpp"

namespace mpiddp::distributed {

const char* shard_scope_name(ShardScope scope) {
  switch (scope) {
    case ShardScope::kNode: return "node";
    case ShardScope::kWorld: return "world";
    case ShardScope::kNone: break;
  }
  return "none";
}

bool shards_across_leaders(const Communicator& comm) { return comm.ranks_on_node() == 1 && comm.size() > 1; }

ShardScope shard_scope(const Communicator& comm, bool shard, bool shares_node_memory, bool compressed,
                       bool gradients_in_parts) {
  if (!shard) return ShardScope::kNone;
  if (shards_across_leaders(comm)) return ShardScope::kWorld;
  const bool several_nodes = comm.ranks_on_node() < comm.size();
  return (several_nodes || gradients_in_parts) && shares_node_memory && !compressed ? ShardScope::kWorld
                                                                                    : ShardScope::kNode;
}

namespace {

// Not sharded: one part, the whole; the state is copied whole on every rank.
class WholeOnEveryRank final : public PartExchange {
 public:
  explicit WholeOnEveryRank(Communicator& comm) : comm_(comm) {}
  ShardScope scope() const override { return ShardScope::kNone; }
  int parts() const override { return 1; }
  int part() const override { return 0; }
  bool is_rank0() const override { return comm_.rank() == 0; }
  void allgather(void*, const std::vector<size_t>&) override {}
  void gather_to_rank0(const void*, void*, const std::vector<size_t>&) override {}
  void copy_state_from_rank0(void* state, size_t bytes) override { comm_.broadcast(state, bytes, 0); }

 private:
  Communicator& comm_;
};

// Node rank r holds part r; every node cuts alike, so the nodes' copies of a part come
// from rank 0's node.
class PartsOfANode final : public PartExchange {
 public:
  explicit PartsOfANode(Communicator& comm) : comm_(comm) {}
  ShardScope scope() const override { return ShardScope::kNode; }
  int parts() const override { return comm_.ranks_on_node(); }
  int part() const override { return comm_.node_rank(); }
  bool is_rank0() const override { return comm_.rank() == 0; }
  void allgather(void* data, const std::vector<size_t>& part_bytes) override {
    comm_.allgather_node_parts(data, part_bytes);
  }
  void gather_to_rank0(const void* mine, void* into, const std::vector<size_t>& part_bytes) override {
    comm_.gather_node_parts(mine, into, part_bytes);
  }
  void copy_state_from_rank0(void* state, size_t bytes) override { comm_.broadcast_among_nodes(state, bytes); }

 private:
  Communicator& comm_;
};

// Every rank holds its world part (Communicator::world_part()), the only copy of it.
class PartsOfTheWorld final : public PartExchange {
 public:
  explicit PartsOfTheWorld(Communicator& comm) : comm_(comm) {}
  ShardScope scope() const override { return ShardScope::kWorld; }
  int parts() const override { return comm_.size(); }
  int part() const override { return comm_.world_part(); }
  bool is_rank0() const override { return comm_.rank() == 0; }
  void allgather(void* data, const std::vector<size_t>& part_bytes) override {
    comm_.allgather_world_parts(data, part_bytes);
  }
  void gather_to_rank0(const void* mine, void* into, const std::vector<size_t>& part_bytes) override {
    comm_.gather_world_parts(mine, into, part_bytes);
  }
  void copy_state_from_rank0(void*, size_t) override {}
  double largest_of_gradient_parts(double value) override {
    comm_.allreduce_max(&value, 1);
    return value;
  }
  // In two halves of 32 bits, as doubles: each rank's halves and their sums over up to 2^20
  // ranks are integers below 2^53, so the double sum is exact in any order, and so is the
  // int64 they make again (which fits: it is the sum's true value).
  int64_t sum_of_gradient_parts(int64_t value) override {
    const auto bits = static_cast<uint64_t>(value);
    double halves[2] = {static_cast<double>(static_cast<int32_t>(bits >> 32)),
                        static_cast<double>(static_cast<uint32_t>(bits))};
    comm_.allreduce_sum(halves, 2);
    const auto high = static_cast<int64_t>(halves[0]), low = static_cast<int64_t>(halves[1]);
    return static_cast<int64_t>(static_cast<uint64_t>(high) * (uint64_t{1} << 32) + static_cast<uint64_t>(low));
  }

 private:
  Communicator& comm_;
};

}  // namespace

std::unique_ptr<PartExchange> part_exchange(Communicator& comm, ShardScope scope) {
  switch (scope) {
    case ShardScope::kNode: return std::make_unique<PartsOfANode>(comm);
    case ShardScope::kWorld: return std::make_unique<PartsOfTheWorld>(comm);
    case ShardScope::kNone: break;
  }
  return std::make_unique<WholeOnEveryRank>(comm);
}

}  // namespace mpiddp::distributed
