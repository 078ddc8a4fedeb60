// A unit's parameters gathered from their owners' parts (include/mpiddp/train/unit_gathers.hpp).
#include "mpiddp/train/unit_gathers.hpp"

#include <algorithm>
#include <cstring>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/hash.hpp"

namespace mpiddp::train {

template <typename T>
UnitGathers<T>::UnitGathers(distributed::Communicator& comm, optim::Optimizer<T>& optimizer,
                            const GradientStaging& plan)
    : comm_(comm),
      optimizer_(optimizer),
      plan_(plan),
      gathered_(plan.units.size(), Gathered::kNo),
      handle_(plan.units.size(), -1),
      started_(plan.units.size()) {
  const std::vector<size_t> part_begins = optimizer_.part_begins();
  for (const GradientStaging::Unit& unit : plan_.units) {
    std::vector<size_t> begins = parts_within_unit(unit, part_begins);
    for (size_t& at : begins) at *= sizeof(T);  // start_gather cuts bytes
    unit_byte_begins_.push_back(std::move(begins));
  }
}

template <typename T>
void UnitGathers<T>::bind(nn::Model<T>& model) {
  staging_.assign(static_cast<size_t>(plan_.values()), T(0));
  std::vector<T*> layer_parameters(model.layers().size(), nullptr);
  for (const GradientStaging::Unit& unit : plan_.units) layer_parameters[unit.layer] = staging_of(unit);
  // The model was built holding its part alone (trainer_setup.cpp), this rank's of the optimizer.
  if (model.holds_all_parameters() || model.parameter_part_begin() != optimizer_.begin() ||
      model.parameter_part_end() != optimizer_.end())
    throw Error(kExitFailure, "reduce.shard \"parameters\" needs a model built holding the optimizer's part",
                Scope::kEveryRank);
  model.bind_unit_parameters(layer_parameters);
  model_ = &model;
}

template <typename T>
void UnitGathers<T>::start_gather(size_t u) {
  const GradientStaging::Unit& unit = plan_.units[u];
  if (unit.slot != GradientStaging::kPinned) {
    // The slot's last unit is done: its forward or backward has ended (the prefetch takes the
    // slot the unit before the current one used), so its parameters may go.
    int& holder = slot_holder_[unit.slot];
    if (holder >= 0 && holder != static_cast<int>(u)) {
      const auto previous = static_cast<size_t>(holder);
      if (gathered_[previous] == Gathered::kTravelling) comm_.wait_gather(handle_[previous]);
      gathered_[previous] = Gathered::kNo;
    }
    holder = static_cast<int>(u);
  }
  // This rank's part of the unit goes where every rank's copy of the unit holds it.
  T* staging = staging_of(unit);
  const Index lo = std::max(optimizer_.begin(), unit.first), hi = std::min(optimizer_.end(), unit.end);
  if (lo < hi)
    std::memcpy(staging + (lo - unit.first), model_->parameter_part() + (lo - optimizer_.begin()),
                static_cast<size_t>(hi - lo) * sizeof(T));
  started_[u] = Clock::now();  // read always: a gather may be waited for in a traced step
  handle_[u] = comm_.start_gather(staging, unit_byte_begins_[u]);
  gathered_[u] = Gathered::kTravelling;
}

template <typename T>
void UnitGathers<T>::ensure_gathered(size_t u) {
  if (gathered_[u] == Gathered::kYes) return;
  if (gathered_[u] == Gathered::kNo) start_gather(u);
  record::StepTrace* trace = trace_;
  const Clock::time_point waiting = trace != nullptr ? Clock::now() : Clock::time_point{};
  comm_.wait_gather(handle_[u]);
  handle_[u] = -1;
  gathered_[u] = Gathered::kYes;
  if (trace != nullptr) {
    // The gather in flight on its unit's track; the wait, inside the forward or backward that
    // needs it, on the compute track: what the prefetch did not hide.
    const Clock::time_point done = Clock::now();
    const GradientStaging::Unit& unit = plan_.units[u];
    trace->unit_gathered(u, static_cast<size_t>(unit.end - unit.first) * sizeof(T), started_[u], done);
    trace->add(record::SpanKind::kGatherWait, waiting, done);
  }
}

template <typename T>
void UnitGathers<T>::before_forward(const nn::LayerUnit& layer) {
  const GradientStaging::Unit* unit = plan_.staged(layer);
  if (unit == nullptr) return;
  const size_t u = plan_.index_of(*unit);
  ensure_gathered(u);
  // The next unit's parameters travel while this one computes.
  if (u + 1 < gathered_.size() && gathered_[u + 1] == Gathered::kNo) start_gather(u + 1);
  comm_.progress();
}

template <typename T>
void UnitGathers<T>::before_backward(const nn::LayerUnit& layer) {
  const GradientStaging::Unit* unit = plan_.staged(layer);
  if (unit == nullptr) return;
  const size_t u = plan_.index_of(*unit);
  ensure_gathered(u);
  // Backward meets the units from the last: the one before this travels meanwhile.
  if (u > 0 && gathered_[u - 1] == Gathered::kNo) start_gather(u - 1);
}

template <typename T>
void UnitGathers<T>::gather_all() {
  for (size_t u = 0; u < gathered_.size(); ++u) ensure_gathered(u);
}

template <typename T>
void UnitGathers<T>::wait_all() {
  for (size_t u = 0; u < gathered_.size(); ++u)
    if (gathered_[u] == Gathered::kTravelling) ensure_gathered(u);
}

template <typename T>
void UnitGathers<T>::forget() {
  std::fill(gathered_.begin(), gathered_.end(), Gathered::kNo);
  slot_holder_[0] = slot_holder_[1] = -1;
}

template <typename T>
double UnitGathers<T>::update_part(const T* part_gradients, double lr) {
  wait_all();
  const double norm = optimizer_.step_on_parameter_part(model_->parameter_part(), part_gradients, lr);
  forget();
  return norm;
}

template <typename T>
void UnitGathers<T>::swap_in_average(T* kept) {
  wait_all();
  optimizer_.swap_in_average_part(model_->parameter_part(), kept);
  forget();
}

template <typename T>
void UnitGathers<T>::restore_parameters(const T* kept) {
  wait_all();
  optimizer_.restore_parameter_part(model_->parameter_part(), kept);
  forget();
}

template <typename T>
ReplicaReport UnitGathers<T>::replica_report() {
  uint64_t hash = fnv1a(nullptr, 0);
  for (size_t u = 0; u < gathered_.size(); ++u) {
    ensure_gathered(u);
    const GradientStaging::Unit& unit = plan_.units[u];
    hash = fnv1a(staging_of(unit), static_cast<size_t>(unit.end - unit.first) * sizeof(T), hash);
  }
  ReplicaReport report;
  report.checksum = hex64(hash);  // one copy of each value: nothing to differ
  return report;
}

template <typename T>
void UnitGathers<T>::describe(io::Json& run_record, const std::string& unit) const {
  // What each rank holds of the parameters in place of all P (Note [parameters gathered by unit]).
  io::Json staging = io::Json::object();
  staging["unit"] = unit;
  staging["units"] = plan_.units.size();
  staging["slot_values"] = {plan_.slot_values[0], plan_.slot_values[1]};
  staging["pinned_values"] = plan_.pinned_values;
  staging["part_values"] = optimizer_.end() - optimizer_.begin();
  run_record["parameter_staging"] = staging;
}

template class UnitGathers<float>;
template class UnitGathers<double>;

}  // namespace mpiddp::train
