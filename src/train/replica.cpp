// The one gather -> forward -> loss -> backward sequence of every step strategy, and the
// gather -> forward -> sums of every evaluation (include/mpiddp/train/replica.hpp).
#include "mpiddp/train/replica.hpp"

#include <algorithm>
#include <cstring>

#include "mpiddp/core/error.hpp"

namespace mpiddp::train {

template <typename T>
Replica<T>::Replica(nn::Model<T>& model, const nn::Loss<T>& loss, const data::Dataset<T>& train,
                    Index batch, Index target_outputs, record::PhaseClock& phases,
                    const std::vector<data::AugmentSpec>& augment)
    : model_(model), loss_(loss), train_(train), phases_(phases), input_kind_(model.input_kind()) {
  // The images are the samples as the model reads them: the data's own shape, or a flat
  // file's as model.input_shape gives it.
  if (!augment.empty()) {
    if (input_kind_ == InputKind::kTokenIds)
      throw ConfigError("data.train.augment", "augmentation takes images, and the model takes token ids from "
                                              "data.train (" + train.name + ")");
    const data::ImageShape image = data::augment_image_shape(model.input_shape(), train.samples, train.name);
    augmentation_ = data::Augmentation<T>(augment, image);
  }
  const Index inputs = nn::shape_size(model.input_shape());
  if (input_kind_ == InputKind::kTokenIds)
    token_ids_.assign(inputs * batch, 0);
  else
    x_.assign(inputs * batch, T(0));
  y_.assign(target_outputs * batch, T(0));
  labels_.assign(train.label_positions * batch, 0);
}

template <typename T>
void Replica<T>::gather(const data::Dataset<T>& set, const Index* samples, Index count) {
  const Index f = set.features, l = set.label_positions;
  for (Index j = 0; j < count; ++j) {
    const Index i = samples[j];
    if (set.token_ids)
      std::copy_n(set.token_ids + set.token_offset(i), f, token_ids_.data() + j * f);
    else
      std::copy_n(set.x + i * f, f, x_.data() + j * f);
    if (set.is_classification()) {
      std::copy_n(set.labels + set.label_offset(i), l, labels_.data() + j * l);
    } else {
      std::memcpy(y_.data() + j * set.outputs, set.y + i * set.outputs,
                  static_cast<size_t>(set.outputs) * sizeof(T));
    }
  }
  x_rows_ = set.features;
  y_rows_ = set.outputs;
  label_rows_ = l;
}

template <typename T>
nn::BatchTargets<T> Replica<T>::targets(Index first) const {
  return {y_.data() + first * y_rows_, labels_.data() + first * label_rows_, label_rows_};
}

template <typename T>
nn::BatchInput<T> Replica<T>::input(Index count) const {
  if (input_kind_ == InputKind::kTokenIds) return nn::BatchInput<T>::of_token_ids(token_ids_.data(), x_rows_, count);
  return nn::BatchInput<T>::of_values(ConstMatrixView<T>(x_.data(), x_rows_, count));
}

template <typename T>
double Replica<T>::forward_loss(const Index* samples, Index count, const nn::PassContext& pass,
                                Index group, double* group_losses) {
  gather(train_, samples, count);
  if (!augmentation_.empty()) augmentation_.apply(x_.data(), count, samples, pass.seed, pass.epoch);
  phases_.lap(&record::StepProfile::data_s, record::SpanKind::kData);
  columns_ = count;
  const ConstMatrixView<T> out = model_.forward(pass, input(count));
  MatrixView<T> out_gradient = model_.output_gradient();
  const Index outputs = out.rows();
  for (Index first = 0, g = 0; first < count; first += group, ++g)
    group_losses[g] = loss_.forward_backward(
        ConstMatrixView<T>(out.data() + first * outputs, outputs, group), targets(first),
        MatrixView<T>(out_gradient.data() + first * outputs, outputs, group));
  phases_.lap(&record::StepProfile::forward_s, record::SpanKind::kForward);
  return group_losses[0];
}

template <typename T>
void Replica<T>::backward(const nn::PassContext& pass, nn::GradientListener* listener) {
  model_.backward(pass, input(columns_), listener);
  phases_.lap(&record::StepProfile::backward_s, record::SpanKind::kBackward);
}

template <typename T>
void Replica<T>::add_evaluation(const data::Dataset<T>& set, const Index* samples, Index count,
                                nn::EvalSums& sums) {
  gather(set, samples, count);
  loss_.accumulate(model_.forward(nn::evaluation_context(), input(count)), targets(0), sums);
}

template class Replica<float>;
template class Replica<double>;

}  // namespace mpiddp::train
