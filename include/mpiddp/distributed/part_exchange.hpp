#pragma once
// What an optimizer sharded across ranks (ZeRO-1, optim/optimizer.hpp) needs of the other
// ranks, and no more: how many parts the parameters are cut into, which is this rank's, and the
// exchange of the parts. The optimizer holds one of these, never the communicator.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace mpiddp::distributed {

class Communicator;

// Among whom the optimizer's state is cut.
enum class ShardScope { kNone, kNode, kWorld };
// "none", "node", "world": the run record's reduce_shard_across.
const char* shard_scope_name(ShardScope scope);

// One rank on every node, and several nodes: each rank is its node's leader.
bool shards_across_leaders(const Communicator& comm);
// Where reduce.shard_optimizer (`shard`) cuts the state on this layout: among the world
// when the nodes' exchange can be a reduce-scatter and an allgather (Note [the optimizer
// sharded across the world] in src/optim/optimizer.cpp): one rank per node, or several
// ranks per node whose gradients and parameters lie in the node's shared memory
// (shares_node_memory: the shm path) and travel between the nodes uncompressed; else among
// the ranks of a node. gradients_in_parts (reduce.shard "gradients"): each rank keeps its part of
// the gradient alone, so the parts are the world's also on one node (on the shm path; the step
// refuses the others, train/step_strategy.hpp).
ShardScope shard_scope(const Communicator& comm, bool shard, bool shares_node_memory, bool compressed,
                       bool gradients_in_parts = false);

// part_bytes below: (parts() + 1) offsets in bytes, where each part of a buffer begins.
class PartExchange {
 public:
  virtual ~PartExchange() = default;
  virtual ShardScope scope() const = 0;
  virtual int parts() const = 0;
  virtual int part() const = 0;  // this rank's, in [0, parts())
  // Whether this rank is rank 0, the one that writes checkpoints.
  virtual bool is_rank0() const = 0;
  // Every rank that shares this cut receives the others' parts of `data`. Collective.
  virtual void allgather(void* data, const std::vector<size_t>& part_bytes) = 0;
  // Rank 0 receives every part of its cut into `into` (null elsewhere). Collective.
  virtual void gather_to_rank0(const void* mine, void* into, const std::vector<size_t>& part_bytes) = 0;
  // divergence.action = resync: the copies of each rank's state become rank 0's (the part of
  // equal rank on rank 0's node, when sharded across a node); with the world's parts there is
  // no other copy, and nothing moves. Collective.
  virtual void copy_state_from_rank0(void* state, size_t bytes) = 0;
  // A scalar of this rank's part of the averaged gradient combined over the ranks whose parts
  // make up the whole: the largest, and the exact int64 sum (the gradient clipping's norm,
  // Note [the norm on a grid] in src/optim/gradient_clip.cpp). Only the world's parts hold
  // the gradient in parts; where every rank holds it whole, the value itself. Collective
  // with the world's parts; allocates nothing.
  virtual double largest_of_gradient_parts(double value) { return value; }
  virtual int64_t sum_of_gradient_parts(int64_t value) { return value; }
};

// The exchange of `scope`'s parts over comm, which must outlive it.
std::unique_ptr<PartExchange> part_exchange(Communicator& comm, ShardScope scope);

}  // namespace mpiddp::distributed
