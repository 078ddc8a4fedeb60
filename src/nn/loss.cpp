#include "mpiddp/nn/loss.hpp"

#include <cmath>


namespace mpiddp::nn {

template <typename T>
double MseLoss<T>::forward_backward(ConstMatrixView<T> out, const BatchTargets<T>& targets,
                                    MatrixView<T> grad) const {
  ConstMatrixView<T> t(targets.values, out.rows(), out.cols());
  grad = out - t;
  const double count = static_cast<double>(out.size());
  const double loss = grad.template cast<double>().squaredNorm() / count;
  grad *= static_cast<T>(2.0 / count);
  return loss;
}

template <typename T>
void MseLoss<T>::accumulate(ConstMatrixView<T> out, const BatchTargets<T>& targets,
                            EvalSums& sums) const {
  ConstMatrixView<T> t(targets.values, out.rows(), out.cols());
  sums.loss_sum += (out - t).template cast<double>().squaredNorm() / static_cast<double>(out.rows());
}

namespace {

// Per-sample cross-entropy of one logit column: logsumexp(z) - z[label], computed stably.
template <typename T>
double sample_cross_entropy(const T* z, Index classes, int32_t label, T* max_out, T* sum_exp_out) {
  T max = z[0];
  for (Index c = 1; c < classes; ++c) max = std::max(max, z[c]);
  T sum_exp = 0;
  for (Index c = 0; c < classes; ++c) sum_exp += std::exp(z[c] - max);
  *max_out = max;
  *sum_exp_out = sum_exp;
  return static_cast<double>(max) + std::log(static_cast<double>(sum_exp)) -
         static_cast<double>(z[label]);
}

}  // namespace

template <typename T>
double CrossEntropyLoss<T>::forward_backward(ConstMatrixView<T> out,
                                             const BatchTargets<T>& targets,
                                             MatrixView<T> grad) const {
  const Index classes = out.rows(), batch = out.cols();
  const T inv_batch = static_cast<T>(1.0 / static_cast<double>(batch));
  double total = 0.0;
  for (Index j = 0; j < batch; ++j) {
    const T* z = out.data() + j * classes;
    T* g = grad.data() + j * classes;
    T max, sum_exp;
    total += sample_cross_entropy(z, classes, targets.labels[j], &max, &sum_exp);
    // d/dz of the batch mean: (softmax(z) - onehot(label)) / B.
    const T inv_sum = T(1) / sum_exp;
    for (Index c = 0; c < classes; ++c) g[c] = std::exp(z[c] - max) * inv_sum * inv_batch;
    g[targets.labels[j]] -= inv_batch;
  }
  return total / static_cast<double>(batch);
}

template <typename T>
void CrossEntropyLoss<T>::accumulate(ConstMatrixView<T> out, const BatchTargets<T>& targets,
                                     EvalSums& sums) const {
  const Index classes = out.rows();
  for (Index j = 0; j < out.cols(); ++j) {
    const T* z = out.data() + j * classes;
    T max, sum_exp;
    sums.loss_sum += sample_cross_entropy(z, classes, targets.labels[j], &max, &sum_exp);
    Index best = 0;
    for (Index c = 1; c < classes; ++c)
      if (z[c] > z[best]) best = c;  // first maximum wins ties, as torch.argmax
    if (best == targets.labels[j]) sums.correct += 1.0;
  }
}

template class MseLoss<float>;
template class MseLoss<double>;
template class CrossEntropyLoss<float>;
template class CrossEntropyLoss<double>;

}  // namespace mpiddp::nn
