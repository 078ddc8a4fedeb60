#pragma once
// The optimizer, whole on every rank or sharded across the ranks of a node (ZeRO-1,
// reduce.shard_optimizer; Note [the optimizer sharded across a node] in
// src/optim/optimizer_shard.cpp), or across every rank of several nodes (Note [the
// optimizer sharded across the world]). The trainer steps it, checkpoints it and
// resynchronises it through this class alone, so that every form shares one path. The
// sharding is the optimizer's own (ZeRO-1 is an optimizer concern): of the other ranks it
// needs only the communicator's parts (world_part, node_rank) and their exchange (allgather
// and gather of the parts, broadcast), never the trainer.
#include <memory>
#include <vector>

#include "mpiddp/distributed/communicator.hpp"
#include "mpiddp/optim/optimizer.hpp"

namespace mpiddp::optim {

// Where part r of n parts of `count` elements begins: count cut into n runs of whole
// 64-byte lines (the last run shorter, trailing runs possibly empty), so that two ranks never
// write the same cache line. part_begin(count, n, n, ...) == count.
Index part_begin(Index count, int parts, int part, size_t element_bytes);

// Among whom the optimizer's state is cut.
enum class ShardScope { kNone, kNode, kWorld };

// One rank on every node, and several nodes: each rank is its node's leader.
bool shards_across_leaders(const distributed::Communicator& comm);
// Where reduce.shard_optimizer (`shard`) cuts the state on this layout: among the world
// when the nodes' exchange can be a reduce-scatter and an allgather (Note [the optimizer
// sharded across the world]): one rank per node, or several ranks per node whose gradients
// and parameters lie in the node's shared memory (shares_node_memory: the shm path) and
// travel between the nodes uncompressed; else among the ranks of a node.
ShardScope shard_scope(const distributed::Communicator& comm, bool shard, bool shares_node_memory,
                       bool compressed);

template <typename T>
class OptimizerShard {
 public:
  // kNode: this rank keeps the state of its node rank's part of the P parameters only;
  // kWorld: of its world part (Communicator::world_part()); kNone: the whole.
  // Local; validates config (optim::make_optimizer).
  OptimizerShard(const optim::OptimizerConfig& config, Index parameters,
                 distributed::Communicator& comm, ShardScope scope);

  bool sharded() const { return scope_ != ShardScope::kNone; }
  // The parts are the world's, and the gradients need be summed only into their owner's
  // part (GradientReducer::scatter_into_parts).
  bool across_world() const { return scope_ == ShardScope::kWorld; }
  // How many parts the parameters are cut into, and whether this rank's is the last (the
  // one that the gradient buffer's reserved slots extend, across the world).
  int parts() const { return static_cast<int>(part_bytes_.size()) - 1; }
  bool holds_last_part() const { return part_ + 1 == parts(); }
  // (parts + 1) where each part begins, in parameters.
  std::vector<size_t> part_begins() const;
  // This rank's part [begin, end) of the parameters.
  Index begin() const { return begin_; }
  Index end() const { return end_; }

  // params, grads: (P), grads already averaged over ranks and equal on every rank (across
  // the world: this rank's part of them). Updates this rank's part; sharded, every rank
  // of the node (across the world: of the world) then receives the others' parts.
  // Collective when sharded. Allocates nothing.
  void step(T* params, const T* grads, double lr);

  // For a checkpoint: on rank 0, the state of all P parameters (the optimizer itself, or,
  // sharded, a temporary one that the parts of rank 0's node are gathered into); null on
  // the other ranks. Collective when sharded (rank 0's node; across the world, the world).
  // Keep it only while writing.
  std::shared_ptr<optim::Optimizer<T>> whole_on_rank0();
  // From a checkpoint: fill(whole) restores the state of all P parameters into `whole`;
  // sharded, this rank then keeps its part. Local. Returns what fill returns.
  template <typename Fill>
  auto restore(Fill fill) {
    if (!sharded()) return fill(*optimizer_);
    const auto whole = optim::make_optimizer<T>(config_, parameters_);
    auto result = fill(*whole);
    keep_part_of(*whole);
    return result;
  }
  // divergence.action = resync: every rank's state becomes rank 0's replica's. Collective.
  void broadcast_from_rank0();

  // The state this rank holds (for tests: its size is the part's).
  optim::Optimizer<T>& local() { return *optimizer_; }

 private:
  void keep_part_of(optim::Optimizer<T>& whole);

  optim::OptimizerConfig config_;
  Index parameters_;
  distributed::Communicator& comm_;
  ShardScope scope_;
  int part_ = 0;  // this rank's part
  Index begin_ = 0, end_ = 0;
  std::vector<size_t> part_bytes_;  // (parts + 1) where each part begins, in bytes
  std::unique_ptr<optim::Optimizer<T>> optimizer_;  // over [begin_, end_)
};

}  // namespace mpiddp::optim
