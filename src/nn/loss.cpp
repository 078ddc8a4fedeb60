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

// A sample's column holds its positions' logits one after another (features in the last
// dimension), so a batch of B samples with P labels each is a (classes, B P) matrix of one
// prediction per column, and the loss is the mean over those B P predictions (PyTorch's
// cross_entropy over logits.view(-1, classes)).
template <typename T>
double CrossEntropyLoss<T>::forward_backward(ConstMatrixView<T> out,
                                             const BatchTargets<T>& targets,
                                             MatrixView<T> grad) const {
  const Index classes = out.rows() / targets.positions, predictions = out.cols() * targets.positions;
  const T inv_count = static_cast<T>(1.0 / static_cast<double>(predictions));
  double total = 0.0;
  for (Index j = 0; j < predictions; ++j) {
    const T* z = out.data() + j * classes;
    T* g = grad.data() + j * classes;
    T max, sum_exp;
    total += sample_cross_entropy(z, classes, targets.labels[j], &max, &sum_exp);
    // d/dz of the mean: (softmax(z) - onehot(label)) / (B P).
    const T inv_sum = T(1) / sum_exp;
    for (Index c = 0; c < classes; ++c) g[c] = std::exp(z[c] - max) * inv_sum * inv_count;
    g[targets.labels[j]] -= inv_count;
  }
  return total / static_cast<double>(predictions);
}

// Per sample: the mean loss over its positions, and the fraction of them predicted right, so
// that sums over samples divided by the samples are the means over every prediction.
template <typename T>
void CrossEntropyLoss<T>::accumulate(ConstMatrixView<T> out, const BatchTargets<T>& targets,
                                     EvalSums& sums) const {
  const Index positions = targets.positions, classes = out.rows() / positions;
  for (Index j = 0; j < out.cols(); ++j) {
    double loss = 0.0, correct = 0.0;
    for (Index p = j * positions; p < (j + 1) * positions; ++p) {
      const T* z = out.data() + p * classes;
      T max, sum_exp;
      loss += sample_cross_entropy(z, classes, targets.labels[p], &max, &sum_exp);
      Index best = 0;
      for (Index c = 1; c < classes; ++c)
        if (z[c] > z[best]) best = c;  // first maximum wins ties, as torch.argmax
      if (best == targets.labels[p]) correct += 1.0;
    }
    sums.loss_sum += loss / static_cast<double>(positions);
    sums.correct += correct / static_cast<double>(positions);
  }
}

template class MseLoss<float>;
template class MseLoss<double>;
template class CrossEntropyLoss<float>;
template class CrossEntropyLoss<double>;

}  // namespace mpiddp::nn
