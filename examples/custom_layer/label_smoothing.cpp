#include "label_smoothing.hpp"

#include <mpiddp/core/error.hpp>

#include <cmath>

namespace swish_example {

LabelSmoothingOptions LabelSmoothingOptions::parse(mpiddp::io::JsonSection& section) {
  LabelSmoothingOptions options;
  options.smoothing = section.number("smoothing", 0.1, 0.0, 1.0);
  if (options.smoothing >= 1.0)
    throw mpiddp::ConfigError(section.key_path("smoothing"),
                              "must be below 1: at 1 every target is uniform and nothing is learned");
  return options;
}

namespace {

// One sample's logits z (K): the smoothed loss -sum_c q_c (z_c - logsumexp(z)), computed in
// double; probabilities_out receives softmax(z).
template <typename T>
double sample_loss(const T* z, mpiddp::Index classes, int32_t label, double eps, double* probabilities_out) {
  double max = static_cast<double>(z[0]);
  for (mpiddp::Index c = 1; c < classes; ++c) max = std::max(max, static_cast<double>(z[c]));
  double sum_exp = 0.0;
  for (mpiddp::Index c = 0; c < classes; ++c) sum_exp += std::exp(static_cast<double>(z[c]) - max);
  const double log_sum = max + std::log(sum_exp);
  const double off = eps / static_cast<double>(classes);
  double loss = 0.0;
  for (mpiddp::Index c = 0; c < classes; ++c) {
    const double log_p = static_cast<double>(z[c]) - log_sum;
    const double q = off + (c == label ? 1.0 - eps : 0.0);
    loss -= q * log_p;
    if (probabilities_out) probabilities_out[c] = std::exp(log_p);
  }
  return loss;
}

}  // namespace

template <typename T>
double LabelSmoothedCrossEntropy<T>::forward_backward(mpiddp::ConstMatrixView<T> out,
                                                      const mpiddp::nn::BatchTargets<T>& targets,
                                                      mpiddp::MatrixView<T> grad) const {
  const mpiddp::Index classes = out.rows(), batch = out.cols();
  const double inv_batch = 1.0 / static_cast<double>(batch), off = eps_ / static_cast<double>(classes);
  double total = 0.0;
  // (K) one sample's probabilities: sized on the first step, reused after it.
  if (probabilities_.size() != static_cast<size_t>(classes)) probabilities_.resize(static_cast<size_t>(classes));
  double* p = probabilities_.data();
  for (mpiddp::Index j = 0; j < batch; ++j) {
    const int32_t label = targets.labels[j];
    total += sample_loss(out.data() + j * classes, classes, label, eps_, p);
    for (mpiddp::Index c = 0; c < classes; ++c) {
      const double q = off + (c == label ? 1.0 - eps_ : 0.0);
      grad(c, j) = static_cast<T>((p[c] - q) * inv_batch);
    }
  }
  return total * inv_batch;
}

template <typename T>
void LabelSmoothedCrossEntropy<T>::accumulate(mpiddp::ConstMatrixView<T> out,
                                              const mpiddp::nn::BatchTargets<T>& targets,
                                              mpiddp::nn::EvalSums& sums) const {
  const mpiddp::Index classes = out.rows();
  for (mpiddp::Index j = 0; j < out.cols(); ++j) {
    const T* z = out.data() + j * classes;
    sums.loss_sum += sample_loss(z, classes, targets.labels[j], eps_, nullptr);
    mpiddp::Index best = 0;
    for (mpiddp::Index c = 1; c < classes; ++c)
      if (z[c] > z[best]) best = c;
    if (best == targets.labels[j]) sums.correct += 1.0;
  }
}

mpiddp::nn::LossType label_smoothing_loss_type() {
  return mpiddp::nn::make_loss_type<LabelSmoothingOptions, LabelSmoothedCrossEntropy>(
      "label_smoothed_cross_entropy", {mpiddp::TargetKind::kClassPerSample}, "class labels");
}

template class LabelSmoothedCrossEntropy<float>;
template class LabelSmoothedCrossEntropy<double>;

}  // namespace swish_example
