#pragma once
// Deterministic mode with reduce.shard "gradients" (ZeRO-2): the deterministic step's chunks and
// exact sums (deterministic_step.hpp), but each rank converts and keeps only its part of the
// averaged gradient, on which its part of the optimizer updates (Note [the exact mean in parts]
// in src/train/deterministic_gradient_part_step.cpp).
#include "mpiddp/train/deterministic_step.hpp"

namespace mpiddp::train {

template <typename T>
class DeterministicGradientPartStep : public DeterministicStep<T> {
 public:
  // The optimizer's parts must be the world's (step_shard_scope): the rank holds no other gradient.
  explicit DeterministicGradientPartStep(const StepParts<T>& parts);

  // The model keeps its own gradient buffer, of which only the part is ever written.
  void place_gradient_buffer(distributed::GradientReducer<T>&, nn::Model<T>&) override {}
  // Collective: the node's ranks share one copy of the parameters, through which the world's
  // parts are exchanged after an update; then the deterministic step's start.
  GemmChoice start(int threads) override;
  // The deterministic step's record, and the values of this rank's part (part_values).
  void describe(io::Json& run_record) const override;

 protected:
  void keep_grid_mean(ChunkGradientGrid<T>& grid, double divisor) override;
  void keep_chunk_mean(const std::vector<double>& mean) override;
  bool mean_finite(T loss) override;
};

}  // namespace mpiddp::train
