#pragma once
// sync off: no gradient reduction. Each rank applies the gradient of its own shard to its
// own replica, so the replicas drift apart (the third experiment: what the allreduce is
// for). Only the loss is reduced, to report the global mean, and the stop votes with it.
#include "mpiddp/train/micro_batch_step.hpp"

namespace mpiddp::train {

template <typename T>
class LocalStep final : public MicroBatchStep<T> {
 public:
  explicit LocalStep(const StepParts<T>& parts);

  StepOutcome reduce(double local_loss) override;
  bool keeps_replicas_identical() const override { return false; }
};

}  // namespace mpiddp::train
