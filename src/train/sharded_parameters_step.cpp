// ZeRO-3's step (include/mpiddp/train/sharded_parameters_step.hpp).
#include "mpiddp/train/sharded_parameters_step.hpp"

#include <algorithm>
#include <cstring>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/hash.hpp"

namespace mpiddp::train {

template <typename T>
ShardedParametersStep<T>::ShardedParametersStep(const StepParts<T>& parts)
    : ShardedGradientsStep<T>(parts),
      comm_(parts.comm),
      optimizer_(parts.optimizer),
      gathered_(this->staging_plan().units.size(), Gathered::kNo),
      gather_handle_(this->staging_plan().units.size(), -1),
      gather_started_(this->staging_plan().units.size()) {
  const std::vector<size_t> part_begins = optimizer_.part_begins();
  for (const GradientStaging::Unit& unit : this->staging_plan().units) {
    std::vector<size_t> begins = parts_within_unit(unit, part_begins);
    for (size_t& at : begins) at *= sizeof(T);  // start_gather cuts bytes
    unit_byte_begins_.push_back(std::move(begins));
  }
}

template <typename T>
GemmChoice ShardedParametersStep<T>::start(int threads) {
  this->bind_gradient_staging();
  const GradientStaging& plan = this->staging_plan();
  parameter_staging_.assign(static_cast<size_t>(plan.values()), T(0));
  std::vector<T*> layer_parameters(this->model_.layers().size(), nullptr);
  for (const GradientStaging::Unit& unit : plan.units) layer_parameters[unit.layer] = staging_of(unit);
  // The model was built holding its part alone (trainer_setup.cpp), this rank's of the optimizer.
  if (this->model_.holds_all_parameters() || this->model_.parameter_part_begin() != optimizer_.begin() ||
      this->model_.parameter_part_end() != optimizer_.end())
    throw Error(kExitFailure, "reduce.shard \"parameters\" needs a model built holding the optimizer's part",
                Scope::kEveryRank);
  this->model_.bind_unit_parameters(layer_parameters);
  return SynchronizedStep<T>::start(threads);
}

template <typename T>
void ShardedParametersStep<T>::start_gather(size_t u) {
  const GradientStaging::Unit& unit = this->staging_plan().units[u];
  if (unit.slot != GradientStaging::kPinned) {
    // The slot's last unit is done: its forward or backward has ended (the prefetch takes the
    // slot the unit before the current one used), so its parameters may go.
    int& holder = slot_holder_[unit.slot];
    if (holder >= 0 && holder != static_cast<int>(u)) {
      const auto previous = static_cast<size_t>(holder);
      if (gathered_[previous] == Gathered::kTravelling) comm_.wait_gather(gather_handle_[previous]);
      gathered_[previous] = Gathered::kNo;
    }
    holder = static_cast<int>(u);
  }
  // This rank's part of the unit goes where every rank's copy of the unit holds it.
  T* staging = staging_of(unit);
  const Index lo = std::max(optimizer_.begin(), unit.first), hi = std::min(optimizer_.end(), unit.end);
  if (lo < hi)
    std::memcpy(staging + (lo - unit.first), this->model_.parameter_part() + (lo - optimizer_.begin()),
                static_cast<size_t>(hi - lo) * sizeof(T));
  gather_started_[u] = Clock::now();  // read always: a gather may be waited for in a traced step
  gather_handle_[u] = comm_.start_gather(staging, unit_byte_begins_[u]);
  gathered_[u] = Gathered::kTravelling;
}

template <typename T>
void ShardedParametersStep<T>::ensure_gathered(size_t u) {
  if (gathered_[u] == Gathered::kYes) return;
  if (gathered_[u] == Gathered::kNo) start_gather(u);
  record::StepTrace* trace = trace_;
  const Clock::time_point waiting = trace != nullptr ? Clock::now() : Clock::time_point{};
  comm_.wait_gather(gather_handle_[u]);
  gather_handle_[u] = -1;
  gathered_[u] = Gathered::kYes;
  if (trace != nullptr) {
    // The gather in flight on its unit's track; the wait, inside the forward or backward that
    // needs it, on the compute track: what the prefetch did not hide.
    const Clock::time_point done = Clock::now();
    const GradientStaging::Unit& unit = this->staging_plan().units[u];
    trace->unit_gathered(u, static_cast<size_t>(unit.end - unit.first) * sizeof(T), gather_started_[u], done);
    trace->add(record::SpanKind::kGatherWait, waiting, done);
  }
}

template <typename T>
void ShardedParametersStep<T>::wait_all_gathers() {
  for (size_t u = 0; u < gathered_.size(); ++u)
    if (gathered_[u] == Gathered::kTravelling) ensure_gathered(u);
}

template <typename T>
double ShardedParametersStep<T>::compute_gradients(const Index* samples, Index count) {
  // A traced step's gathers are traced until its reduction: the evaluation after it gathers
  // every unit per round, more spans than the trace keeps room for per step.
  trace_ = this->pipeline_.phases().trace();
  return ShardedGradientsStep<T>::compute_gradients(samples, count);
}

template <typename T>
StepOutcome ShardedParametersStep<T>::reduce(double local_loss) {
  trace_ = nullptr;  // also when the step is skipped (not finite) and no update follows
  return ShardedGradientsStep<T>::reduce(local_loss);
}

template <typename T>
void ShardedParametersStep<T>::before_forward(const nn::LayerUnit& layer) {
  ShardedGradientsStep<T>::before_forward(layer);
  const GradientStaging::Unit* unit = this->staged(layer);
  if (unit == nullptr) return;
  const auto u = static_cast<size_t>(unit - this->staging_plan().units.data());
  ensure_gathered(u);
  // The next unit's parameters travel while this one computes.
  if (u + 1 < gathered_.size() && gathered_[u + 1] == Gathered::kNo) start_gather(u + 1);
  comm_.progress();
}

template <typename T>
void ShardedParametersStep<T>::before_backward(const nn::LayerUnit& layer) {
  ShardedGradientsStep<T>::before_backward(layer);
  const GradientStaging::Unit* unit = this->staged(layer);
  if (unit == nullptr) return;
  const auto u = static_cast<size_t>(unit - this->staging_plan().units.data());
  ensure_gathered(u);
  // Backward meets the units from the last: the one before this travels meanwhile.
  if (u > 0 && gathered_[u - 1] == Gathered::kNo) start_gather(u - 1);
}

template <typename T>
double ShardedParametersStep<T>::update(double lr) {
  wait_all_gathers();
  const double norm = optimizer_.step_on_parameter_part(this->model_.parameter_part(), this->gradient_part(), lr);
  forget_gathered();
  return norm;
}

template <typename T>
void ShardedParametersStep<T>::forget_gathered() {
  std::fill(gathered_.begin(), gathered_.end(), Gathered::kNo);
  slot_holder_[0] = slot_holder_[1] = -1;
}

template <typename T>
void ShardedParametersStep<T>::swap_in_average(T* kept) {
  wait_all_gathers();
  optimizer_.swap_in_average_part(this->model_.parameter_part(), kept);
  forget_gathered();
}

template <typename T>
void ShardedParametersStep<T>::restore_parameters(const T* kept) {
  wait_all_gathers();
  optimizer_.restore_parameter_part(this->model_.parameter_part(), kept);
  forget_gathered();
}

template <typename T>
void ShardedParametersStep<T>::evaluation_round_without_batch() {
  for (size_t u = 0; u < gathered_.size(); ++u) ensure_gathered(u);
}

template <typename T>
std::optional<ReplicaReport> ShardedParametersStep<T>::report_from_parts() {
  // The units lie one after another and cover [0, P): their bytes in order are the whole
  // buffer's, so the hash chained through them is the whole buffer's (fnv1a).
  uint64_t hash = fnv1a(nullptr, 0);
  for (size_t u = 0; u < gathered_.size(); ++u) {
    ensure_gathered(u);
    const GradientStaging::Unit& unit = this->staging_plan().units[u];
    hash = fnv1a(staging_of(unit), static_cast<size_t>(unit.end - unit.first) * sizeof(T), hash);
  }
  ReplicaReport report;
  report.checksum = hex64(hash);  // one copy of each value: nothing to differ
  return report;
}

template <typename T>
void ShardedParametersStep<T>::describe(io::Json& run_record) const {
  ShardedGradientsStep<T>::describe(run_record);
  // What each rank holds of the parameters in place of all P (Note [parameters gathered by unit]).
  const GradientStaging& plan = this->staging_plan();
  io::Json staging = io::Json::object();
  staging["unit"] = this->parts_.config.reduce.shard_unit;
  staging["units"] = plan.units.size();
  staging["slot_values"] = {plan.slot_values[0], plan.slot_values[1]};
  staging["pinned_values"] = plan.pinned_values;
  staging["part_values"] = optimizer_.end() - optimizer_.begin();
  run_record["parameter_staging"] = staging;
}

template class ShardedParametersStep<float>;
template class ShardedParametersStep<double>;

}  // namespace mpiddp::train
