// The one gather -> forward -> loss -> backward sequence of every step strategy, and the
// gather -> forward -> sums of every evaluation (include/mpiddp/train/batch_pipeline.hpp).
#include "mpiddp/train/batch_pipeline.hpp"

#include <utility>

#include "mpiddp/core/error.hpp"

namespace mpiddp::train {

template <typename T>
BatchPipeline<T>::BatchPipeline(nn::Model<T>& model, const nn::Loss<T>& loss, const data::Dataset<T>& train,
                    Index batch, Index target_outputs, record::PhaseClock& phases,
                    const std::vector<data::AugmentSpec>& augment, bool prefetch)
    : model_(model), loss_(loss), train_(train), phases_(phases) {
  const InputKind kind = model.input_kind();
  // The images are the samples as the model reads them: the data's own shape, or a flat
  // file's as model.input_shape gives it.
  if (!augment.empty()) {
    if (kind == InputKind::kTokenIds)
      throw ConfigError("data.train.augment", "augmentation takes images, and the model takes token ids from "
                                              "data.train (" + train.name + ")");
    const data::ImageShape image = data::augment_image_shape(model.input_shape(), train.samples, train.name);
    augmentation_ = data::Augmentation<T>(augment, image);
  }
  const Index inputs = nn::shape_size(model.input_shape());
  batch_ = BatchBuffers<T>(batch, inputs, kind, target_outputs, train.label_positions);
  // The worker's set has the pipeline's shape: the two trade places.
  if (prefetch)
    prefetcher_ = std::make_unique<BatchPrefetcher<T>>(
        train, augmentation_, BatchBuffers<T>(batch, inputs, kind, target_outputs, train.label_positions));
}

template <typename T>
void BatchPipeline<T>::prefetch(const Index* samples, Index count, int64_t epoch) {
  if (prefetcher_) prefetcher_->request(samples, count, training_pass_.seed, epoch);
}

template <typename T>
Index BatchPipeline<T>::training_batch(const Index* samples, Index count, const nn::PassContext& pass) {
  if (prefetcher_) {
    // A part of the batch held (the step's later micro-batches), else the worker's batch.
    Index first = batch_.contents().find(samples, count, pass.seed, pass.epoch);
    if (first < 0 && prefetcher_->take(samples, count, pass.seed, pass.epoch, batch_))
      first = batch_.contents().find(samples, count, pass.seed, pass.epoch);
    if (first >= 0) return batch_.place(first, count);
  }
  batch_.gather_training(train_, samples, count, augmentation_, pass.seed, pass.epoch);
  return 0;
}

template <typename T>
double BatchPipeline<T>::forward_loss(const Index* samples, Index count, const nn::PassContext& pass,
                                Index group, double* group_losses) {
  // With prefetch, data_s is the wait for the worker's batch, or the gather when there is none.
  first_ = training_batch(samples, count, pass);
  phases_.lap(&record::StepProfile::data_s, record::SpanKind::kData);
  columns_ = count;
  const ConstMatrixView<T> out = model_.forward(pass, batch_.input(first_, count));
  MatrixView<T> out_gradient = model_.output_gradient();
  const Index outputs = out.rows();
  for (Index first = 0, g = 0; first < count; first += group, ++g)
    group_losses[g] = loss_.forward_backward(
        ConstMatrixView<T>(out.data() + first * outputs, outputs, group), batch_.targets(first_ + first),
        MatrixView<T>(out_gradient.data() + first * outputs, outputs, group));
  phases_.lap(&record::StepProfile::forward_s, record::SpanKind::kForward);
  return group_losses[0];
}

template <typename T>
void BatchPipeline<T>::backward(const nn::PassContext& pass, nn::GradientListener* listener) {
  model_.backward(pass, batch_.input(first_, columns_), listener);
  phases_.lap(&record::StepProfile::backward_s, record::SpanKind::kBackward);
}

template <typename T>
void BatchPipeline<T>::add_evaluation(const data::Dataset<T>& set, const Index* samples, Index count,
                                nn::EvalSums& sums) {
  batch_.gather(set, samples, count);
  loss_.accumulate(model_.forward(nn::evaluation_context(), batch_.input(0, count)), batch_.targets(0), sums);
}

template class BatchPipeline<float>;
template class BatchPipeline<double>;

}  // namespace mpiddp::train
