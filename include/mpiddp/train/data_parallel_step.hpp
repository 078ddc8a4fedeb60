#pragma once
// The default step (sync on): every rank's gradients summed and divided by N by the
// gradient reducer, the loss and the stop votes riding in the same reduction, and the
// reduction of each bucket starting during backward (reduce.overlap) on every path.
#include <memory>
#include <optional>

#include "mpiddp/train/micro_batch_step.hpp"
#include "mpiddp/train/sharding_scope.hpp"

namespace mpiddp::train {

template <typename T>
class DataParallelStep final : public MicroBatchStep<T> {
 public:
  explicit DataParallelStep(const StepParts<T>& parts);

  // Where the parameters live (sharding_scope.hpp); then the library, as the local step
  // chooses it.
  GemmChoice start(int threads) override;
  StepOutcome reduce(double local_loss) override;
  // With shard statistics each rank's running statistics are its own: evaluate, like
  // PyTorch DDP's next forward, with rank 0's.
  void before_evaluation() override;

 private:
  void before_pass() override;
  nn::GradientListener* before_last_backward(double loss) override;
  // batchnorm.sync off: rank 0's buffers to every rank, before a step and an evaluation.
  void share_rank0_buffers();
  // Whether the step may apply: the same answer on every rank, without communication.
  bool reduced_values_finite(std::optional<bool> sums_finite) const;

  // Hands backward's "gradients ready" calls to the reducer.
  struct ReadyForwarder final : nn::GradientListener {
    distributed::GradientReducer<T>* reducer = nullptr;
    void gradients_ready(Index offset) override { reducer->ready_from(static_cast<size_t>(offset)); }
  };

  distributed::GradientReducer<T>& reducer_;
  // What the optimizer's sharding scope asks of the reduction (sharding_scope.hpp).
  std::unique_ptr<ShardingScope<T>> scope_;
  ReadyForwarder ready_forwarder_;
  // Fault injection writes into the gradient buffer after backward, which an overlapped
  // reduction may already be sending: a run with injection reduces after backward.
  bool overlap_;
  // batchnorm.sync off: rank 0's buffers go to every rank before each step (PyTorch DDP's
  // broadcast_buffers), as the ranks' shard statistics would otherwise drift apart.
  bool broadcast_buffers_each_step_;
  bool sync_started_ = false;  // compute_gradients began the reduction, reduce finishes it
};

}  // namespace mpiddp::train
