// The one gather -> forward -> loss -> backward sequence of every step strategy, and the
// gather -> forward -> sums of every evaluation (include/mpiddp/train/replica.hpp).
#include "mpiddp/train/replica.hpp"

#include <algorithm>
#include <cstring>

namespace mpiddp::train {

template <typename T>
Replica<T>::Replica(nn::Model<T>& model, const nn::Loss<T>& loss, const data::Dataset<T>& train,
                    Index batch, Index target_outputs, PhaseClock& phases)
    : model_(model), loss_(loss), train_(train), phases_(phases) {
  x_.assign(nn::shape_size(model.input_shape()) * batch, T(0));
  y_.assign(target_outputs * batch, T(0));
  labels_.assign(batch, 0);
}

template <typename T>
void Replica<T>::gather(const data::Dataset<T>& set, const Index* samples, Index count) {
  const auto x_bytes = static_cast<size_t>(set.features) * sizeof(T);
  for (Index j = 0; j < count; ++j) {
    const Index i = samples[j];
    std::memcpy(x_.data() + j * set.features, set.x + i * set.features, x_bytes);
    if (set.is_classification()) {
      labels_[j] = set.labels[i];
    } else {
      std::memcpy(y_.data() + j * set.outputs, set.y + i * set.outputs,
                  static_cast<size_t>(set.outputs) * sizeof(T));
    }
  }
  x_rows_ = set.features;
  y_rows_ = set.outputs;
}

template <typename T>
nn::BatchTargets<T> Replica<T>::targets(Index first) const {
  return {y_.data() + first * y_rows_, labels_.data() + first};
}

template <typename T>
double Replica<T>::forward_loss(const Index* samples, Index count, const nn::PassContext& pass,
                                Index group, double* group_losses) {
  gather(train_, samples, count);
  phases_.lap(&StepProfile::data_s, SpanKind::kData);
  columns_ = count;
  const ConstMatrixView<T> out = model_.forward(pass, ConstMatrixView<T>(x_.data(), x_rows_, count));
  MatrixView<T> out_gradient = model_.output_gradient();
  const Index outputs = out.rows();
  for (Index first = 0, g = 0; first < count; first += group, ++g)
    group_losses[g] = loss_.forward_backward(
        ConstMatrixView<T>(out.data() + first * outputs, outputs, group), targets(first),
        MatrixView<T>(out_gradient.data() + first * outputs, outputs, group));
  phases_.lap(&StepProfile::forward_s, SpanKind::kForward);
  return group_losses[0];
}

template <typename T>
void Replica<T>::backward(const nn::PassContext& pass, nn::GradientListener* listener) {
  model_.backward(pass, ConstMatrixView<T>(x_.data(), x_rows_, columns_), listener);
  phases_.lap(&StepProfile::backward_s, SpanKind::kBackward);
}

template <typename T>
void Replica<T>::add_evaluation(const data::Dataset<T>& set, const Index* samples, Index count,
                                nn::EvalSums& sums) {
  gather(set, samples, count);
  const ConstMatrixView<T> x(x_.data(), set.features, count);
  loss_.accumulate(model_.forward(nn::evaluation_context(), x), targets(0), sums);
}

template class Replica<float>;
template class Replica<double>;

}  // namespace mpiddp::train
