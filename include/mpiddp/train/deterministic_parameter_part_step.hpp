#pragma once
// Deterministic mode with reduce.shard "parameters" (ZeRO-3): the deterministic step with the
// gradient in parts (deterministic_gradient_part_step.hpp), on a model that holds its part of
// the parameters alone, each unit's parameters gathered from the parts before its forward and
// its backward (unit_gathers.hpp; Note [parameters gathered by unit]), in every chunk's pass
// (Note [the deterministic pass gathering units] in
// src/train/deterministic_parameter_part_step.cpp).
#include <optional>

#include "mpiddp/nn/layer_hooks.hpp"
#include "mpiddp/train/deterministic_gradient_part_step.hpp"
#include "mpiddp/train/gradient_staging.hpp"
#include "mpiddp/train/unit_gathers.hpp"

namespace mpiddp::train {

template <typename T>
class DeterministicParameterPartStep final : public DeterministicGradientPartStep<T>, private nn::LayerHooks {
 public:
  explicit DeterministicParameterPartStep(const StepParts<T>& parts);
  ~DeterministicParameterPartStep() override;

  // The model reads its units' parameters where the gathers put them, and the hooks gather
  // them; then the deterministic step's start.
  GemmChoice start(int threads) override;
  // The optimizer's update of this rank's part of the parameters; nothing is exchanged after
  // it: the next pass gathers the updated parts.
  double update(double lr) override;
  void swap_in_average(T* kept) override;
  void restore_parameters(const T* kept) override;
  std::optional<ReplicaReport> report_from_parts() override;
  void describe(io::Json& run_record) const override;

 protected:
  void evaluation_round_without_block() override { gathers_.gather_all(); }

 private:
  void before_forward(const nn::LayerUnit& layer) override;
  void before_backward(const nn::LayerUnit& layer) override;
  void after_backward(const nn::LayerUnit& /*layer*/) override {}

  GradientStaging plan_;  // the units, and their staging for the parameters
  UnitGathers<T> gathers_;
};

}  // namespace mpiddp::train
