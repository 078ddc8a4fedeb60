#include "mpiddp/nn/activation.hpp"

#include <cmath>
#include <type_traits>

#include <unsupported/Eigen/SpecialFunctions>

namespace mpiddp::nn {

template <typename T>
std::string Activation<T>::type() const {
  switch (kind_) {
    case ActivationKind::kTanh: return "tanh";
    case ActivationKind::kRelu: return "relu";
    case ActivationKind::kSigmoid: return "sigmoid";
    case ActivationKind::kGelu:
    case ActivationKind::kGeluTanh: return "gelu";
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
      // Note [gelu's erf]: in float32 Eigen's vectorised erf (a rational function good to a
      // couple of ulps; libm's scalar erff took a quarter of a GPT step); in float64 libm's.
      if constexpr (std::is_same_v<T, float>)
        y.array() = T(0.5) * x.array() * (T(1) + (x.array() * T(M_SQRT1_2)).erf());
      else
        y.array() = x.array().unaryExpr([](T v) { return T(0.5) * v * (T(1) + std::erf(v * T(M_SQRT1_2))); });
      break;
    case ActivationKind::kGeluTanh:
      // PyTorch's approximate="tanh" (GPT-2's): x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2.
      y.array() = x.array().unaryExpr([](T v) {
        return T(0.5) * v * (T(1) + std::tanh(T(M_2_SQRTPI * M_SQRT1_2) * (v + T(0.044715) * v * v * v)));
      });
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
      if constexpr (std::is_same_v<T, float>) {  // Note [gelu's erf]
        const auto v = x.array();
        dx->array() = dy.array() * (T(0.5) * (T(1) + (v * T(M_SQRT1_2)).erf()) +
                                    v * ((T(-0.5) * v * v).exp() * T(0.5 * M_2_SQRTPI * M_SQRT1_2)));
        break;
      }
      dx->array() = dy.array() * x.array().unaryExpr([](T v) {
        const T cdf = T(0.5) * (T(1) + std::erf(v * T(M_SQRT1_2)));
        const T pdf = std::exp(T(-0.5) * v * v) * T(0.5 * M_2_SQRTPI * M_SQRT1_2);
        return cdf + v * pdf;
      });
      break;
    case ActivationKind::kGeluTanh:
      // With u = sqrt(2/pi) (x + 0.044715 x^3) and t = tanh(u):
      // d/dx = (1 + t) / 2 + x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2) / 2.
      dx->array() = dy.array() * x.array().unaryExpr([](T v) {
        const T k = T(M_2_SQRTPI * M_SQRT1_2);
        const T t = std::tanh(k * (v + T(0.044715) * v * v * v));
        return T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * k * (T(1) + T(3 * 0.044715) * v * v);
      });
      break;
  }
}

template class Activation<float>;
template class Activation<double>;

}  // namespace mpiddp::nn
