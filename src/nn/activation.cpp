#include "mpiddp/nn/activation.hpp"

#include <cmath>

namespace mpiddp::nn {

template <typename T>
std::string Activation<T>::type() const {
  switch (kind_) {
    case ActivationKind::kTanh: return "tanh";
    case ActivationKind::kRelu: return "relu";
    case ActivationKind::kSigmoid: return "sigmoid";
    case ActivationKind::kGelu: return "gelu";
  }
  return "?";
}

template <typename T>
void Activation<T>::forward(const PassContext&, ConstMatrixView<T> x, MatrixView<T> y) {
  switch (kind_) {
    case ActivationKind::kTanh: y.array() = x.array().tanh(); break;
    case ActivationKind::kRelu: y.array() = x.array().max(T(0)); break;
    case ActivationKind::kSigmoid: y.array() = T(1) / (T(1) + (-x.array()).exp()); break;
    case ActivationKind::kGelu:
      // The exact form, as PyTorch's default: x * Phi(x) with Phi(x) = (1 + erf(x/sqrt 2)) / 2.
      y.array() = x.array().unaryExpr(
          [](T v) { return T(0.5) * v * (T(1) + std::erf(v * T(M_SQRT1_2))); });
      break;
  }
}

template <typename T>
void Activation<T>::backward(const PassContext&, ConstMatrixView<T> x, ConstMatrixView<T> y,
                             ConstMatrixView<T> dy, MatrixView<T>* dx) {
  if (!dx) return;
  switch (kind_) {
    case ActivationKind::kTanh: dx->array() = dy.array() * (T(1) - y.array().square()); break;
    case ActivationKind::kRelu:
      // PyTorch's convention: the derivative at exactly 0 is 0.
      dx->array() = (x.array() > T(0)).select(dy.array(), T(0));
      break;
    case ActivationKind::kSigmoid: dx->array() = dy.array() * y.array() * (T(1) - y.array()); break;
    case ActivationKind::kGelu:
      // d/dx [x Phi(x)] = Phi(x) + x phi(x), phi the standard normal density.
      dx->array() = dy.array() * x.array().unaryExpr([](T v) {
        const T cdf = T(0.5) * (T(1) + std::erf(v * T(M_SQRT1_2)));
        const T pdf = std::exp(T(-0.5) * v * v) * T(0.5 * M_2_SQRTPI * M_SQRT1_2);
        return cdf + v * pdf;
      });
      break;
  }
}

template class Activation<float>;
template class Activation<double>;

}  // namespace mpiddp::nn
