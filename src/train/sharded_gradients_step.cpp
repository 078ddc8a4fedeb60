// ZeRO-2's step (include/mpiddp/train/sharded_gradients_step.hpp).
#include "mpiddp/train/sharded_gradients_step.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "mpiddp/distributed/communicator.hpp"

namespace mpiddp::train {

template <typename T>
ShardedGradientsStep<T>::ShardedGradientsStep(const StepParts<T>& parts)
    : SynchronizedStep<T>(parts),
      reducer_(parts.reducer),
      optimizer_(parts.optimizer),
      staging_plan_(plan_gradient_staging(this->model_.units())),
      part_(static_cast<size_t>(parts.optimizer.end() - parts.optimizer.begin()), T(0)),
      handle_of_(staging_plan_.units.size(), -1),
      in_flight_(staging_plan_.units.size(), 0),
      overlap_(parts.config.reduce.overlap),
      last_layer_key_(std::to_string(this->model_.layers().size() - 1)) {
  require_world_parts(parts.optimizer, parts.comm);
  const std::vector<size_t> parts_begin = parts.optimizer.part_begins();
  slot_begins_.assign(parts_begin.size(), 0);  // the slots follow the last part
  slot_begins_.back() = kReservedSlots;
  for (const GradientStaging::Unit& unit : staging_plan_.units) {
    unit_begins_.push_back(parts_within_unit(unit, parts_begin));
    std::vector<std::pair<Index, Index>> added;
    for (const auto& [from, to] : this->model_.gradients_added_to()) {
      const Index lo = std::max(from, unit.first), hi = std::min(to, unit.end);
      if (lo < hi) added.emplace_back(lo - unit.first, hi - unit.first);
    }
    unit_added_to_.push_back(std::move(added));
  }
}

template <typename T>
ShardedGradientsStep<T>::~ShardedGradientsStep() {
  this->model_.install_hooks(nullptr);
}

template <typename T>
GemmChoice ShardedGradientsStep<T>::start(int threads) {
  bind_gradient_staging();
  return SynchronizedStep<T>::start(threads);
}

template <typename T>
void ShardedGradientsStep<T>::bind_gradient_staging() {
  // The units' staging, then the loss and stop slots (Note [the loss rides with the gradients]).
  const auto values = static_cast<size_t>(staging_plan_.values() + kReservedSlots);
  staging_ = reducer_.allocate_shared_buffer(values);
  if (staging_ == nullptr) {
    own_staging_.assign(values, T(0));
    staging_ = own_staging_.data();
  }
  slots_ = staging_ + staging_plan_.values();
  std::vector<T*> layer_gradients(this->model_.layers().size(), nullptr);
  for (const GradientStaging::Unit& unit : staging_plan_.units) layer_gradients[unit.layer] = staging_of(unit);
  this->model_.bind_unit_gradients(layer_gradients);
  this->model_.install_hooks(this);
}

template <typename T>
void ShardedGradientsStep<T>::prepare_gradients() {
  std::fill(part_.begin(), part_.end(), T(0));
}

template <typename T>
void ShardedGradientsStep<T>::clear_added_to(const GradientStaging::Unit& unit) {
  T* staging = staging_of(unit);
  for (const auto& [from, to] : unit_added_to_[staging_plan_.index_of(unit)])
    std::fill(staging + from, staging + to, T(0));
}

template <typename T>
void ShardedGradientsStep<T>::before_backward(const nn::LayerUnit& layer) {
  reducer_.progress();
  // The last layer's backward is the pass's first: the pinned units, to whose tensors the
  // later layers tied to them add first (the GPT's head, itself without parameters of its
  // own), are cleared now, once an earlier micro-batch's sums have been collected.
  if (layer.depth == 0 && layer.key == last_layer_key_) {
    collect_all_in_flight();
    for (const GradientStaging::Unit& pinned : staging_plan_.units)
      if (pinned.slot == GradientStaging::kPinned) clear_added_to(pinned);
  }
  const GradientStaging::Unit* unit = staging_plan_.staged(layer);
  if (unit == nullptr || unit->slot == GradientStaging::kPinned) return;
  // The slot's last unit must have been summed before this one writes over it.
  int& user = slot_user_[unit->slot];
  if (user >= 0) collect(static_cast<size_t>(user));
  user = static_cast<int>(staging_plan_.index_of(*unit));
  clear_added_to(*unit);
}

template <typename T>
void ShardedGradientsStep<T>::after_backward(const nn::LayerUnit& layer) {
  const GradientStaging::Unit* unit = staging_plan_.staged(layer);
  if (unit == nullptr) return;
  const size_t u = staging_plan_.index_of(*unit);
  handle_of_[u] = reducer_.start_unit_sum(staging_of(*unit), unit_begins_[u]);
  in_flight_[u] = 1;
  if (!overlap_) collect(u);
}

template <typename T>
void ShardedGradientsStep<T>::collect(size_t u) {
  const GradientStaging::Unit& unit = staging_plan_.units[u];
  reducer_.wait_unit_sum(handle_of_[u], u, static_cast<size_t>(unit.end - unit.first) * sizeof(T));
  handle_of_[u] = -1;
  in_flight_[u] = 0;
  if (unit.slot != GradientStaging::kPinned && slot_user_[unit.slot] == static_cast<int>(u))
    slot_user_[unit.slot] = -1;
  // This rank's part of the unit: [lo, hi) of the model's parameters.
  const Index begin = optimizer_.begin();
  const Index lo = std::max(begin, unit.first), hi = std::min(optimizer_.end(), unit.end);
  if (lo >= hi) return;  // the unit does not meet this rank's part (which may be empty)
  const T* sum = staging_of(unit) + (lo - unit.first);
  T* part = part_.data() + (lo - begin);
  for (Index i = 0; i < hi - lo; ++i) part[i] += sum[i];
}

template <typename T>
void ShardedGradientsStep<T>::collect_all_in_flight() {
  // In the same order on every rank: on a node a sum runs in its wait.
  for (size_t u = staging_plan_.units.size(); u-- > 0;)
    if (in_flight_[u]) collect(u);
}

template <typename T>
StepOutcome ShardedGradientsStep<T>::reduce(double local_loss) {
  // Note [the loss rides with the gradients]: the loss and the stop vote are summed as the
  // whole buffer's last values would be, into the last part's owner, in the same order, so
  // the step's loss has the bits of the unsharded step's.
  slots_[kLossSlot] = static_cast<T>(local_loss);
  slots_[kStopSlot] = static_cast<T>(stop_vote());
  const int slots_sum = reducer_.start_unit_sum(slots_, slot_begins_);
  collect_all_in_flight();
  reducer_.wait_unit_sum(slots_sum, staging_plan_.units.size(), kReservedSlots * sizeof(T));
  this->pipeline_.phases().lap(&record::StepProfile::sync_exposed_s, record::SpanKind::kReductionWait);
  // Each rank holds its part alone: Note [the step's verdict from scattered gradients].
  const StepVerdict verdict = verdict_from_parts(this->parts_.comm, optimizer_.holds_last_part(), slots_[kLossSlot],
                                                 slots_[kStopSlot], part_.data(), static_cast<Index>(part_.size()));
  StepOutcome outcome;
  outcome.loss = verdict.loss;
  outcome.finite = verdict.finite;
  outcome.stop_requested = verdict.stop_vote > 0.0;
  outcome.locally_finite = std::isfinite(local_loss);
  outcome.gradients_inspected = false;  // summed as backward made them
  return outcome;
}

template <typename T>
double ShardedGradientsStep<T>::update(double lr) {
  return optimizer_.step_on_part(this->model_.parameters(), part_.data(), lr);
}

template <typename T>
void ShardedGradientsStep<T>::describe(io::Json& run_record) const {
  // What each rank holds of the gradients in place of all P (Note [gradients staged by unit]).
  io::Json staging = io::Json::object();
  staging["units"] = staging_plan_.units.size();
  staging["slot_values"] = {staging_plan_.slot_values[0], staging_plan_.slot_values[1]};
  staging["pinned_values"] = staging_plan_.pinned_values;
  staging["part_values"] = part_.size();
  run_record["gradient_staging"] = staging;
}

template class ShardedGradientsStep<float>;
template class ShardedGradientsStep<double>;

}  // namespace mpiddp::train
