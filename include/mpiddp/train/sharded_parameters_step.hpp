#pragma once
// Note [parameters gathered by unit]
// With reduce.shard "parameters" (ZeRO-3, FSDP's FULL_SHARD) a rank keeps only its part of
// the parameters, as of the gradient and of the optimizer state: the world's part
// [optimizer.begin(), optimizer.end()), P/N values, which the model is built holding (it
// never holds all P: nn::Model's part, initialised a layer at a time, restored and loaded
// from checkpoints and weights keeping each tensor's slice). A unit
// (reduce.shard_unit "block": one of the model's own layers, a residual with its whole body)
// is gathered from its owners' parts just before its forward, and again just before its
// backward, into staging memory planned as ZeRO-2's gradients are (the same plan: two slots
// that the units take in turn, and a pinned place for a unit a later layer is tied to), so a
// rank holds its part, the two slots and the pinned units, in place of P.
//
// While one unit computes, the next one's gather travels (the prefetch: the next unit in
// forward, the one before in backward), into the other slot, whose unit is done. A pinned unit
// (the GPT's token embedding, whose table the head reads again) is gathered once per step, at
// its forward, and read by the head and by its own backward from there: its gradient is summed
// once, after its own backward (Note [gradients staged by unit]).
//
// The gradients are ZeRO-2's: summed a unit at a time into the owners' parts, scaled by 1/N
// there and nowhere else (GradientReducer::start_unit_sum). The update is the optimizer's on
// this rank's part of the parameters alone, and nothing is exchanged after it: the next pass
// gathers the updated parts. Every rank gathers the same units in the same order, so every
// rank's forward sees the values the unsharded run's replicas hold, and the records,
// param_checksum and checkpoints are the unsharded run's bit for bit.
//
// Every rank evaluates as many rounds as the rank with the most (MicroBatchStep::evaluate),
// and a rank without a batch left in a round still gathers every unit, since each gather is a
// collective.
#include <optional>

#include "mpiddp/train/sharded_gradients_step.hpp"
#include "mpiddp/train/unit_gathers.hpp"

namespace mpiddp::train {

template <typename T>
class ShardedParametersStep final : public ShardedGradientsStep<T> {
 public:
  explicit ShardedParametersStep(const StepParts<T>& parts);

  // Collective: ZeRO-2's staging, then the model reads its units' parameters where this step
  // gathers them; then what every synchronized step does.
  GemmChoice start(int threads) override;
  double compute_gradients(const Index* samples, Index count) override;
  StepOutcome reduce(double local_loss) override;
  double update(double lr) override;
  // The average in the part's place (and back): the units gathered meanwhile are gathered again.
  void swap_in_average(T* kept) override;
  void restore_parameters(const T* kept) override;
  std::optional<ReplicaReport> report_from_parts() override;
  void describe(io::Json& run_record) const override;
  // ZeRO-2's, and per micro-batch each unit's gather and its wait, in forward and in backward.
  size_t communication_spans_per_step(size_t buckets) const override {
    return ShardedGradientsStep<T>::communication_spans_per_step(buckets) +
           4 * this->staging_plan().units.size() * static_cast<size_t>(this->parts_.config.accumulate_steps);
  }

 private:
  void before_forward(const nn::LayerUnit& unit) override;
  void before_backward(const nn::LayerUnit& unit) override;
  // The other ranks' evaluation passes gather every unit: so does this rank.
  void evaluation_round_without_batch() override { gathers_.gather_all(); }

  UnitGathers<T> gathers_;
};

}  // namespace mpiddp::train
