#include "mpiddp/nn/linear.hpp"

#include <cmath>

namespace mpiddp::nn {

template <typename T>
void Linear<T>::bind(T* params, T* grads) {
  weight_ = params;
  bias_ = params + outputs_ * inputs_;
  weight_grad_ = grads;
  bias_grad_ = grads + outputs_ * inputs_;
}

template <typename T>
void Linear<T>::initialize(Rng& rng) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(inputs_));
  for (Index i = 0; i < parameter_count(); ++i) weight_[i] = static_cast<T>(rng.uniform(-bound, bound));
}

template <typename T>
void Linear<T>::forward(ConstMatrixView<T> x, MatrixView<T> y) const {
  ConstMatrixView<T> wt(weight_, inputs_, outputs_);
  VectorView<T> b(bias_, outputs_);
  // y = W x + b, written as (W^T)^T x so Eigen's GEMM reads the weights in place. The bias
  // goes in first and the product is added to it: "=" would zero y and then add anyway, so
  // the bias costs no pass of its own.
  y.colwise() = b;
  y.noalias() += wt.transpose() * x;
}

template <typename T>
void Linear<T>::backward(ConstMatrixView<T> x, ConstMatrixView<T>, ConstMatrixView<T> dy,
                         MatrixView<T>* dx) {
  MatrixView<T> dwt(weight_grad_, inputs_, outputs_);
  VectorView<T> db(bias_grad_, outputs_);
  dwt.noalias() += x * dy.transpose();  // dW^T = x dy^T: (F, B)(B, O)
  db.noalias() += dy.rowwise().sum();
  if (dx) {
    ConstMatrixView<T> wt(weight_, inputs_, outputs_);
    dx->noalias() = wt * dy;  // dx = W^T dy: (F, O)(O, B)
  }
}

template class Linear<float>;
template class Linear<double>;

}  // namespace mpiddp::nn
