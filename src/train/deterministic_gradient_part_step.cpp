// Deterministic mode's step with the gradient in parts (include/mpiddp/train/
// deterministic_gradient_part_step.hpp).
//
// Note [the exact mean in parts]
// The deterministic step's mean over the C chunks is an exact sum turned into values once
// (Note [deterministic mode], 3): every value's bits follow from the integers of its own sum
// and its tensor's grid, never from which rank converts it or what else is converted beside
// it. So a rank may convert its part [begin, end) of the gradient alone and get the bits the
// unsharded step gives those values, at every N: the chunked pass's int64 sums are summed
// whole (exact in any order) and only the part converted; the chunk-by-chunk pass's summed
// terms are whole on every rank, and only the part kept. The optimizer's part updates from
// it (Optimizer::step reads [begin, end) of the gradient buffer when its parts are the
// world's), so the model's gradient buffer outside the part is never written: its pages stay
// untouched and take no memory. The step's verdict comes from the parts (Note [the step's
// verdict from scattered gradients]); the loss and the stop vote are every rank's already.
// What stays whole: the chunked pass's int64 sums (P of them) and the chunk-by-chunk pass's
// terms, as in the unsharded deterministic step.
#include "mpiddp/train/deterministic_gradient_part_step.hpp"

#include "mpiddp/train/sharding_scope.hpp"

namespace mpiddp::train {

template <typename T>
DeterministicGradientPartStep<T>::DeterministicGradientPartStep(const StepParts<T>& parts)
    : DeterministicStep<T>(parts) {
  require_world_parts(parts.optimizer, parts.comm);
}

template <typename T>
GemmChoice DeterministicGradientPartStep<T>::start(int threads) {
  share_parameters_on_node(this->parts_.reducer, this->model_);
  return DeterministicStep<T>::start(threads);
}

template <typename T>
void DeterministicGradientPartStep<T>::describe(io::Json& run_record) const {
  DeterministicStep<T>::describe(run_record);
  run_record["deterministic"]["part_values"] = this->parts_.optimizer.end() - this->parts_.optimizer.begin();
}

template <typename T>
void DeterministicGradientPartStep<T>::keep_grid_mean(ChunkGradientGrid<T>& grid, double divisor) {
  const optim::Optimizer<T>& optimizer = this->parts_.optimizer;
  grid.finish_part(divisor, this->model_.gradients(), static_cast<size_t>(optimizer.begin()),
                   static_cast<size_t>(optimizer.end()), this->parts_.reducer.algorithm());
}

template <typename T>
void DeterministicGradientPartStep<T>::keep_chunk_mean(const std::vector<double>& mean) {
  T* grads = this->model_.gradients();
  for (Index i = this->parts_.optimizer.begin(); i < this->parts_.optimizer.end(); ++i)
    grads[i] = static_cast<T>(mean[i]);
}

template <typename T>
bool DeterministicGradientPartStep<T>::mean_finite(T loss) {
  const optim::Optimizer<T>& optimizer = this->parts_.optimizer;
  // Every rank holds the loss: the last part's owner brings it to the verdict, as its slot would.
  return verdict_from_parts(this->parts_.comm, optimizer.holds_last_part(), loss, T(0),
                            this->model_.gradients() + optimizer.begin(), optimizer.end() - optimizer.begin())
      .finite;
}

template class DeterministicGradientPartStep<float>;
template class DeterministicGradientPartStep<double>;

}  // namespace mpiddp::train
