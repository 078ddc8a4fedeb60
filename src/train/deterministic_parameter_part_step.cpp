// Deterministic mode with the parameters in parts (include/mpiddp/train/
// deterministic_parameter_part_step.hpp).
//
// Note [the deterministic pass gathering units]
// Deterministic mode passes each rank's C/N chunks through the model (one after another, or
// side by side in the chunked pass: Note [the chunked pass]), and every rank holds as many
// chunks as every other, so every rank meets the units in the same order and makes the same
// gathers: each chunk's forward gathers the units from the first, each backward from the
// last, with the next unit's gather travelling meanwhile. A unit still in its slot from the
// last pass is not gathered again (nothing changes the parts between the chunks of a step), so
// the chunk by chunk pass gathers about 2 U - 2 units per chunk. The gathered values are the
// unsharded run's parameters, so each chunk's pass is the unsharded one's, and the exact
// mean in parts (Note [the exact mean in parts]) gives the unsharded step's bits at every N.
// An evaluation round in which this rank has no block left gathers every unit, as the others'
// passes do.
#include "mpiddp/train/deterministic_parameter_part_step.hpp"

namespace mpiddp::train {

template <typename T>
DeterministicParameterPartStep<T>::DeterministicParameterPartStep(const StepParts<T>& parts)
    : DeterministicGradientPartStep<T>(parts),
      plan_(plan_gradient_staging(parts.pipeline.model().units())),
      gathers_(parts.comm, parts.optimizer, plan_) {}

template <typename T>
DeterministicParameterPartStep<T>::~DeterministicParameterPartStep() {
  this->model_.install_hooks(nullptr);
}

template <typename T>
GemmChoice DeterministicParameterPartStep<T>::start(int threads) {
  gathers_.bind(this->model_);
  this->model_.install_hooks(this);
  return DeterministicGradientPartStep<T>::start(threads);
}

template <typename T>
void DeterministicParameterPartStep<T>::before_forward(const nn::LayerUnit& layer) {
  gathers_.before_forward(layer);
}

template <typename T>
void DeterministicParameterPartStep<T>::before_backward(const nn::LayerUnit& layer) {
  gathers_.before_backward(layer);
}

template <typename T>
double DeterministicParameterPartStep<T>::update(double lr) {
  // The part of the averaged gradient lies where the whole one would (Note [the exact mean in parts]).
  return gathers_.update_part(this->model_.gradients() + this->parts_.optimizer.begin(), lr);
}

template <typename T>
void DeterministicParameterPartStep<T>::swap_in_average(T* kept) {
  gathers_.swap_in_average(kept);
}

template <typename T>
void DeterministicParameterPartStep<T>::restore_parameters(const T* kept) {
  gathers_.restore_parameters(kept);
}

template <typename T>
std::optional<ReplicaReport> DeterministicParameterPartStep<T>::report_from_parts() {
  return gathers_.replica_report();
}

template <typename T>
void DeterministicParameterPartStep<T>::describe(io::Json& run_record) const {
  DeterministicGradientPartStep<T>::describe(run_record);
  gathers_.describe(run_record, this->parts_.config.reduce.shard_unit);
}

template class DeterministicParameterPartStep<float>;
template class DeterministicParameterPartStep<double>;

}  // namespace mpiddp::train
