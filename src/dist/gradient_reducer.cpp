#include "mpiddp/dist/gradient_reducer.hpp"

namespace mpiddp::dist {

template <typename T>
void GradientReducer<T>::reduce(T* grads, size_t count) {
  comm_.allreduce_sum(grads, count);
  // Note [why divide by the world size here]: each rank's gradient is that of the mean loss
  // over its own b = B/N samples. The mean of the N shard gradients is therefore the
  // gradient of the mean loss over all B samples, i.e. exactly what one process computes
  // for the whole global batch. The sum above gives N times that, so we scale by 1/N, once,
  // here and nowhere else: the optimizer and the loss never know the world size.
  if (comm_.size() == 1) return;
  const T scale = T(1) / static_cast<T>(comm_.size());
  for (size_t i = 0; i < count; ++i) grads[i] *= scale;
}

template class GradientReducer<float>;
template class GradientReducer<double>;

}  // namespace mpiddp::dist
