#pragma once
// What the optimizer's sharding scope (none, node, world: distributed::ShardScope) asks of the
// data-parallel step, as a part chosen once from the optimizer, so that the step itself holds
// no branch on sharding:
//   none   the reducer sums the whole buffer on every rank; nothing else differs;
//   node   the same sum; on the shm path the node's ranks share one copy of the parameters
//          (Note [parameters once per node]);
//   world  the reducer sums each rank's part into that rank only (Note [the optimizer sharded
//          across the world]), the node's ranks share the parameters as with node, and the
//          step's verdict comes from the parts (Note [the step's verdict from scattered
//          gradients]).
#include <memory>
#include <optional>

#include "mpiddp/distributed/gradient_reducer.hpp"
#include "mpiddp/nn/model.hpp"
#include "mpiddp/optim/optimizer.hpp"

namespace mpiddp::distributed {
class Communicator;
}

namespace mpiddp::train {

template <typename T>
class ShardingScope {
 public:
  virtual ~ShardingScope() = default;
  // At construction, local: where the reducer leaves the sums of the model's gradient buffer.
  virtual void plan_reduction(distributed::GradientReducer<T>& /*reducer*/, const nn::Model<T>& /*model*/) {}
  // At start, collective on the shm path: where the model's parameters live from now on.
  virtual void place_parameters(distributed::GradientReducer<T>& /*reducer*/, nn::Model<T>& /*model*/) {}
  // After the reduction, with the loss and stop slots (step_strategy.hpp's kLossSlot and
  // kStopSlot) after the P gradients: whether every reduced value is finite, alike on every
  // rank, or nullopt when the reduction could not tell and the buffer is to be scanned. Leaves
  // the global loss and stop vote in their slots on every rank. Collective. Where every rank
  // holds the whole sum: what the reducer checked as it summed, if anything.
  virtual std::optional<bool> agree_on_sums(distributed::GradientReducer<T>& reducer, nn::Model<T>& /*model*/) {
    return reducer.agreed_finite();
  }
};

// From here on the replicas are identical, so the node's ranks can share one copy of the
// parameters where the reducer has node memory (Note [parameters once per node] in
// src/distributed/mpi_shared_memory_sum.cpp): the optimizer's parts cut among the world are
// exchanged through it. Collective on the shm path; nothing where no memory is shared, or
// where the model holds its part of the parameters alone.
template <typename T>
void share_parameters_on_node(distributed::GradientReducer<T>& reducer, nn::Model<T>& model);

// The steps that keep only their part of the averaged gradient need the optimizer's parts to
// be the world's (or one, the whole): the rank holds no other gradient. Throws otherwise.
template <typename T>
void require_world_parts(const optim::Optimizer<T>& optimizer, const distributed::Communicator& comm);

// Note [the step's verdict from scattered gradients] (sharding_scope.cpp): with the gradient
// in the world's parts, what every rank must decide alike, from this rank's part (part:
// count values) and, on the last part's owner (holds_slots), the summed loss and stop vote.
// One allreduce of three numbers. Collective.
struct StepVerdict {
  double loss = 0.0;       // the global mean loss
  double stop_vote = 0.0;  // the mean of the ranks' votes: positive when any voted
  bool finite = true;      // the loss and every part are finite
};
template <typename T>
StepVerdict verdict_from_parts(distributed::Communicator& comm, bool holds_slots, T loss, T stop_vote, const T* part,
                               Index count);

// The part for `optimizer`'s scope; comm and optimizer outlive it.
template <typename T>
std::unique_ptr<ShardingScope<T>> sharding_scope(const optim::Optimizer<T>& optimizer,
                                                 distributed::Communicator& comm);

}  // namespace mpiddp::train
