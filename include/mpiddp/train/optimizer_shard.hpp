#pragma once
// The optimizer, whole on every rank or sharded across the ranks of a node (ZeRO-1,
// reduce.shard_optimizer; Note [the optimizer sharded across a node] in
// src/train/optimizer_shard.cpp), or, with one rank per node, across the ranks of the world
// (Note [the optimizer sharded across the leaders]). The trainer steps it, checkpoints it and resynchronises it
// through this class alone, so that both forms share one path.
#include <memory>
#include <vector>

#include "mpiddp/distributed/communicator.hpp"
#include "mpiddp/optim/optimizer.hpp"

namespace mpiddp::train {

// Where part r of n parts of `count` elements begins: count cut into n runs of whole
// 64-byte lines (the last run shorter, trailing runs possibly empty), so that two ranks never
// write the same cache line. part_begin(count, n, n, ...) == count.
Index part_begin(Index count, int parts, int part, size_t element_bytes);

// On this layout reduce.shard_optimizer cuts the parameters among the world, not among the
// ranks of a node: one rank on every node, and several nodes (Note [the optimizer sharded
// across the leaders]).
bool shards_across_leaders(const distributed::Communicator& comm);
// How many parts reduce.shard_optimizer cuts the parameters into on this layout.
int optimizer_parts(const distributed::Communicator& comm);

template <typename T>
class OptimizerShard {
 public:
  // sharded: this rank keeps the state of its node rank's part of the P parameters only
  // (with one rank per node and several nodes: its world rank's part); else the whole.
  // Local; validates config (optim::make_optimizer).
  OptimizerShard(const optim::OptimizerConfig& config, Index parameters,
                 distributed::Communicator& comm, bool sharded);

  bool sharded() const { return sharded_; }
  // Sharded with one rank per node: the parts are the world's, and the gradients need be
  // summed only into their owner's part (GradientReducer::scatter_into_parts).
  bool across_leaders() const { return across_leaders_; }
  // (parts + 1) where each part begins, in parameters.
  std::vector<size_t> part_begins() const;
  // This rank's part [begin, end) of the parameters.
  Index begin() const { return begin_; }
  Index end() const { return end_; }

  // params, grads: (P), grads already averaged over ranks and equal on every rank (across
  // the leaders: this rank's part of them). Updates this rank's part; sharded, every rank
  // of the node (across the leaders: of the world) then receives the others' parts.
  // Collective when sharded. Allocates nothing.
  void step(T* params, const T* grads, double lr);

  // For a checkpoint: on rank 0, the state of all P parameters (the optimizer itself, or,
  // sharded, a temporary one that the parts of rank 0's node are gathered into); null on
  // the other ranks. Collective when sharded (rank 0's node; across the leaders, the world).
  // Keep it only while writing.
  std::shared_ptr<optim::Optimizer<T>> whole_on_rank0();
  // From a checkpoint: fill(whole) restores the state of all P parameters into `whole`;
  // sharded, this rank then keeps its part. Local. Returns what fill returns.
  template <typename Fill>
  auto restore(Fill fill) {
    if (!sharded_) return fill(*optimizer_);
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
  bool sharded_;
  bool across_leaders_;
  Index begin_ = 0, end_ = 0;
  std::vector<size_t> part_bytes_;  // (parts + 1) where each part begins, in bytes
  std::unique_ptr<optim::Optimizer<T>> optimizer_;  // over [begin_, end_)
};

}  // namespace mpiddp::train
