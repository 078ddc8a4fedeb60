// The sharding scopes as parts of the data-parallel step (include/mpiddp/train/sharding_scope.hpp).
#include "mpiddp/train/sharding_scope.hpp"

#include <cmath>
#include <vector>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/finite.hpp"
#include "mpiddp/distributed/communicator.hpp"
#include "mpiddp/train/step_strategy.hpp"

namespace mpiddp::train {

template <typename T>
void share_parameters_on_node(distributed::GradientReducer<T>& reducer, nn::Model<T>& model) {
  // reduce.shard "parameters": each rank holds its part alone, and no rank all of them.
  if (!model.holds_all_parameters()) return;
  if (T* copy = reducer.share_on_node(model.parameters(), static_cast<size_t>(model.parameter_count())))
    model.adopt_parameters(copy);
}

template <typename T>
void require_world_parts(const optim::Optimizer<T>& optimizer, const distributed::Communicator& comm) {
  if (comm.size() > 1 && optimizer.scope() != distributed::ShardScope::kWorld)
    throw Error(kExitFailure, "reduce.shard \"gradients\" needs the optimizer's parts cut among the world",
                Scope::kEveryRank);
}

template void require_world_parts(const optim::Optimizer<float>&, const distributed::Communicator&);
template void require_world_parts(const optim::Optimizer<double>&, const distributed::Communicator&);
template void share_parameters_on_node(distributed::GradientReducer<float>&, nn::Model<float>&);
template void share_parameters_on_node(distributed::GradientReducer<double>&, nn::Model<double>&);

namespace {

// Not sharded: every rank holds the whole sum and the parameters of its own; nothing differs.
template <typename T>
class WholeSums final : public ShardingScope<T> {};

// The optimizer's state cut among a node's ranks: the sum is whole, and on the shm path
// the node's ranks share one copy of the parameters.
template <typename T>
class NodeParts final : public ShardingScope<T> {
 public:
  void place_parameters(distributed::GradientReducer<T>& reducer, nn::Model<T>& model) override {
    share_parameters_on_node(reducer, model);
  }
};

// The optimizer's state cut among the world's ranks: each rank receives the sum of its own
// part only, the last part's owner the loss and stop slots too.
template <typename T>
class WorldParts final : public ShardingScope<T> {
 public:
  WorldParts(const optim::Optimizer<T>& optimizer, distributed::Communicator& comm)
      : optimizer_(optimizer), comm_(comm) {}

  void plan_reduction(distributed::GradientReducer<T>& reducer, const nn::Model<T>& model) override {
    // Each rank's part of the sum; the last one with the loss and stop slots after the
    // parameters.
    std::vector<size_t> owned = optimizer_.part_begins();
    owned.back() = static_cast<size_t>(model.gradient_count());
    reducer.scatter_into_parts(std::move(owned));
  }
  void place_parameters(distributed::GradientReducer<T>& reducer, nn::Model<T>& model) override {
    share_parameters_on_node(reducer, model);
  }
  std::optional<bool> agree_on_sums(distributed::GradientReducer<T>&, nn::Model<T>& model) override;

 private:
  const optim::Optimizer<T>& optimizer_;
  distributed::Communicator& comm_;
};

// Note [the step's verdict from scattered gradients]: with the optimizer sharded across the
// world each rank holds the summed gradients of its own part only (Note [the scattered
// sum] in src/distributed/mpi_scattered_sum.cpp), and the loss and stop slots, which end the
// buffer, only the owner of the last part. One allreduce of three numbers brings every rank
// the loss, the stop vote and whether any part is non-finite, so that every rank decides
// alike. Adding zeros to the one rank's loss leaves its bits as they are.
template <typename T>
std::optional<bool> WorldParts<T>::agree_on_sums(distributed::GradientReducer<T>&, nn::Model<T>& model) {
  const Index p = model.parameter_count();
  T* grads = model.gradients();
  const Index begin = optimizer_.begin(), end = optimizer_.end();
  const StepVerdict verdict = verdict_from_parts(comm_, optimizer_.holds_last_part(), grads[p + kLossSlot],
                                                 grads[p + kStopSlot], grads + begin, end - begin);
  grads[p + kLossSlot] = static_cast<T>(verdict.loss);
  grads[p + kStopSlot] = static_cast<T>(verdict.stop_vote);
  return verdict.finite;
}

}  // namespace

template <typename T>
StepVerdict verdict_from_parts(distributed::Communicator& comm, bool holds_slots, T loss, T stop_vote, const T* part,
                               Index count) {
  double sums[3] = {holds_slots ? static_cast<double>(loss) : 0.0, holds_slots ? static_cast<double>(stop_vote) : 0.0,
                    all_finite(part, count) ? 0.0 : 1.0};
  comm.allreduce_sum(sums, 3);
  // The parts' verdict says nothing of the loss, which lies past every part.
  return {sums[0], sums[1], sums[2] == 0.0 && std::isfinite(sums[0])};
}

template StepVerdict verdict_from_parts(distributed::Communicator&, bool, float, float, const float*, Index);
template StepVerdict verdict_from_parts(distributed::Communicator&, bool, double, double, const double*, Index);

template <typename T>
std::unique_ptr<ShardingScope<T>> sharding_scope(const optim::Optimizer<T>& optimizer,
                                                 distributed::Communicator& comm) {
  switch (optimizer.scope()) {
    case distributed::ShardScope::kNode: return std::make_unique<NodeParts<T>>();
    case distributed::ShardScope::kWorld: return std::make_unique<WorldParts<T>>(optimizer, comm);
    case distributed::ShardScope::kNone: break;
  }
  return std::make_unique<WholeSums<T>>();
}

template std::unique_ptr<ShardingScope<float>> sharding_scope(const optim::Optimizer<float>&,
                                                              distributed::Communicator&);
template std::unique_ptr<ShardingScope<double>> sharding_scope(const optim::Optimizer<double>&,
                                                               distributed::Communicator&);

}  // namespace mpiddp::train
