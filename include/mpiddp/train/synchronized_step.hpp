#pragma once
// What the steps with sync on share, whichever way they combine the gradients
// (DataParallelStep: whole sums; ShardedGradientsStep: each rank its part): BatchNorm's
// statistics over the ranks (batchnorm.sync), rank 0's buffers to every rank otherwise, and the
// parameters placed where the optimizer's sharding scope wants them (sharding_scope.hpp).
#include <memory>

#include "mpiddp/train/micro_batch_step.hpp"
#include "mpiddp/train/sharding_scope.hpp"

namespace mpiddp::train {

template <typename T>
class SynchronizedStep : public MicroBatchStep<T> {
 public:
  explicit SynchronizedStep(const StepParts<T>& parts);

  // Where the parameters live (sharding_scope.hpp); then the library, as the local step
  // chooses it.
  GemmChoice start(int threads) override;
  // With shard statistics each rank's running statistics are its own: evaluate, like
  // PyTorch DDP's next forward, with rank 0's.
  void before_evaluation() override;

 protected:
  void before_pass() override;
  ShardingScope<T>& scope() { return *scope_; }

 private:
  // batchnorm.sync off: rank 0's buffers to every rank, before a step and an evaluation.
  void share_rank0_buffers();

  // What the optimizer's sharding scope asks of the step (sharding_scope.hpp).
  std::unique_ptr<ShardingScope<T>> scope_;
  // batchnorm.sync off: rank 0's buffers go to every rank before each step (PyTorch DDP's
  // broadcast_buffers), as the ranks' shard statistics would otherwise drift apart.
  bool broadcast_buffers_each_step_;
};

}  // namespace mpiddp::train
