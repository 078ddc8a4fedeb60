// ZeRO-3's step (include/mpiddp/train/sharded_parameters_step.hpp).
#include "mpiddp/train/sharded_parameters_step.hpp"


namespace mpiddp::train {

template <typename T>
ShardedParametersStep<T>::ShardedParametersStep(const StepParts<T>& parts)
    : ShardedGradientsStep<T>(parts),
      gathers_(parts.comm, parts.optimizer, this->staging_plan()) {}

template <typename T>
GemmChoice ShardedParametersStep<T>::start(int threads) {
  this->bind_gradient_staging();
  gathers_.bind(this->model_);
  return SynchronizedStep<T>::start(threads);
}

template <typename T>
double ShardedParametersStep<T>::compute_gradients(const Index* samples, Index count) {
  // A traced step's gathers are traced until its reduction: the evaluation after it gathers
  // every unit per round, more spans than the trace keeps room for per step.
  gathers_.trace_into(this->pipeline_.phases().trace());
  return ShardedGradientsStep<T>::compute_gradients(samples, count);
}

template <typename T>
StepOutcome ShardedParametersStep<T>::reduce(double local_loss) {
  gathers_.trace_into(nullptr);  // also when the step is skipped (not finite) and no update follows
  return ShardedGradientsStep<T>::reduce(local_loss);
}

template <typename T>
void ShardedParametersStep<T>::before_forward(const nn::LayerUnit& layer) {
  ShardedGradientsStep<T>::before_forward(layer);
  gathers_.before_forward(layer);
}

template <typename T>
void ShardedParametersStep<T>::before_backward(const nn::LayerUnit& layer) {
  ShardedGradientsStep<T>::before_backward(layer);
  gathers_.before_backward(layer);
}

template <typename T>
double ShardedParametersStep<T>::update(double lr) {
  return gathers_.update_part(this->gradient_part(), lr);
}

template <typename T>
void ShardedParametersStep<T>::swap_in_average(T* kept) {
  gathers_.swap_in_average(kept);
}

template <typename T>
void ShardedParametersStep<T>::restore_parameters(const T* kept) {
  gathers_.restore_parameters(kept);
}

template <typename T>
std::optional<ReplicaReport> ShardedParametersStep<T>::report_from_parts() {
  return gathers_.replica_report();
}

template <typename T>
void ShardedParametersStep<T>::describe(io::Json& run_record) const {
  ShardedGradientsStep<T>::describe(run_record);
  gathers_.describe(run_record, this->parts_.config.reduce.shard_unit);
}

template class ShardedParametersStep<float>;
template class ShardedParametersStep<double>;

}  // namespace mpiddp::train
