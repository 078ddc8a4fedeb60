#pragma once
// reduce.shard "gradients" (ZeRO-2): the data-parallel step in which each rank keeps its part
// of the averaged gradient alone. Backward's gradients are staged a unit at a time and summed
// into their owners' parts as soon as each unit's backward ends (Note [gradients staged by
// unit] in gradient_staging.hpp); the optimizer, cut among the world's ranks as with
// reduce.shard "optimizer" across the world, updates this rank's part of the parameters from
// its part of the gradient, and the parts are gathered again (optim::Optimizer::step_on_part).
// What it installs on the model are layer hooks (nn/layer_hooks.hpp): the model's code does not
// know.
#include <string>
#include <vector>

#include "mpiddp/core/memory.hpp"
#include "mpiddp/nn/layer_hooks.hpp"
#include "mpiddp/train/gradient_staging.hpp"
#include "mpiddp/train/synchronized_step.hpp"

namespace mpiddp::train {

template <typename T>
class ShardedGradientsStep : public SynchronizedStep<T>, protected nn::LayerHooks {
 public:
  explicit ShardedGradientsStep(const StepParts<T>& parts);
  ~ShardedGradientsStep() override;

  // No whole gradient buffer: the staging and the part are this step's own.
  void place_gradient_buffer(distributed::GradientReducer<T>&, nn::Model<T>&) override {}
  // Collective: the staging (in the node's shared memory with several ranks on a node), the
  // model's gradient views bound to it, and the hooks; then what every synchronized step does.
  GemmChoice start(int threads) override;
  StepOutcome reduce(double local_loss) override;
  double update(double lr) override;
  void describe(io::Json& run_record) const override;
  size_t communication_spans_per_step(size_t /*buckets*/) const override {
    return staging_plan_.units.size() * static_cast<size_t>(this->parts_.config.accumulate_steps) + 1;
  }

 protected:
  // ZeRO-3's step (sharded_parameters_step.hpp) adds the parameters' gather to these hooks.
  void before_forward(const nn::LayerUnit& /*unit*/) override {}
  void before_backward(const nn::LayerUnit& unit) override;
  void after_backward(const nn::LayerUnit& unit) override;
  const GradientStaging& staging_plan() const { return staging_plan_; }
  // This rank's part of the averaged gradient, once reduce() has returned.
  const T* gradient_part() const { return part_.data(); }
  // start's own work: the staging, the model's gradient views bound to it, and the hooks.
  // Collective.
  void bind_gradient_staging();

 private:
  // The part is summed into afresh each step, and every micro-batch's backward writes its
  // unit's staging anew: its sums have gone to the part already.
  void prepare_gradients() override;
  bool gradients_start_over(Index /*micro_batch*/) const override { return true; }

  T* staging_of(const GradientStaging::Unit& unit) { return staging_ + staging_plan_.begin_of(unit); }
  // Clears what backward adds to within the unit's staging (Model::gradients_added_to).
  void clear_added_to(const GradientStaging::Unit& unit);
  // Waits for the unit's sum and adds this rank's part of it into part_.
  void collect(size_t unit);
  void collect_all_in_flight();

  distributed::GradientReducer<T>& reducer_;
  optim::Optimizer<T>& optimizer_;
  GradientStaging staging_plan_;
  std::vector<std::vector<size_t>> unit_begins_;  // (units) (parts + 1): the parts within each unit
  std::vector<std::vector<std::pair<Index, Index>>> unit_added_to_;  // (units) ranges in the unit
  // (staging_plan_.values() + kReservedSlots) own_staging_ or the node's shared memory
  T* staging_ = nullptr;
  T* slots_ = nullptr;              // (kReservedSlots) after the staging: the loss and the stop vote
  std::vector<size_t> slot_begins_; // (parts + 1) the slots, all in the last part
  nn::AlignedVector<T> own_staging_;
  nn::AlignedVector<T> part_;       // (end - begin) this rank's part of the averaged gradient
  std::vector<int> handle_of_;   // (units) the unit's sum's handle (-1 with one rank)
  std::vector<char> in_flight_;  // (units) started and not yet collected
  int slot_user_[2] = {-1, -1}; // the unit whose staging each slot holds, or -1
  bool overlap_;                // reduce.overlap: a unit's sum travels while the next computes
  std::string last_layer_key_;  // the model's last layer's, whose backward is the pass's first
};

}  // namespace mpiddp::train
