#include "swish.hpp"

#include <mpiddp/core/error.hpp>

#include <cmath>

namespace swish_example {

SwishOptions SwishOptions::parse(mpiddp::io::JsonSection& section) {
  SwishOptions options;
  // Above 100, sigmoid(beta x) is a step for every x a network produces: use relu instead.
  options.beta = section.number("beta", options.beta, 0.0, 100.0);
  if (options.beta == 0.0)
    throw mpiddp::ConfigError(section.key_path("beta"), "expected beta > 0 (beta = 0 is x / 2)");
  return options;
}

template <typename T>
Swish<T>::Swish(const SwishOptions& options, const mpiddp::nn::Shape& input, const std::string&)
    : mpiddp::nn::Layer<T>(input, input), beta_(static_cast<T>(options.beta)) {}

template <typename T>
void Swish<T>::forward(const mpiddp::nn::PassContext&, mpiddp::ConstMatrixView<T> x,
                       mpiddp::MatrixView<T> y) {
  y.array() = x.array() / (T(1) + (-beta_ * x.array()).exp());
}

template <typename T>
void Swish<T>::backward(const mpiddp::nn::PassContext&, mpiddp::ConstMatrixView<T> x,
                        mpiddp::ConstMatrixView<T>, mpiddp::ConstMatrixView<T> dy,
                        mpiddp::MatrixView<T>* dx) {
  if (!dx) return;
  // d/dx [x s(bx)] = s + b x s (1 - s); s is recomputed, since y = x s cannot give it at x = 0.
  dx->array() = dy.array() * x.array().unaryExpr([b = beta_](T v) {
    const T s = T(1) / (T(1) + std::exp(-b * v));
    return s + b * v * s * (T(1) - s);
  });
}

template class Swish<float>;
template class Swish<double>;

mpiddp::nn::LayerType swish_layer_type() {
  return mpiddp::nn::make_layer_type<SwishOptions, Swish>("swish");
}

}  // namespace swish_example
