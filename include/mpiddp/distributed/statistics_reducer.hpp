#pragma once
// The distributed side of nn::StatisticsReducer: BatchNorm's per-channel sums, reduced over
// every rank of the communicator, so that a layer normalises with the global batch's
// statistics without knowing about ranks (nn/context.hpp).
#include "mpiddp/distributed/communicator.hpp"
#include "mpiddp/nn/context.hpp"

namespace mpiddp::distributed {

class CommunicatorStatistics final : public nn::StatisticsReducer {
 public:
  explicit CommunicatorStatistics(Communicator& comm) : comm_(comm) {}
  // Blocking: the layer needs the sums before it can go on. In double, whatever the run's
  // dtype: the counts and sums of a large batch lose digits in float32.
  void sum(double* values, size_t count) override { comm_.allreduce_sum(values, count); }

 private:
  Communicator& comm_;
};

}  // namespace mpiddp::distributed
