#pragma once
// Elementwise activations: y = f(x), any shape to the same shape, no parameters.
#include "mpiddp/nn/layer.hpp"

namespace mpiddp::nn {

enum class ActivationKind { kTanh, kRelu, kSigmoid, kGelu };

template <typename T>
class Activation final : public Layer<T> {
 public:
  Activation(ActivationKind kind, const Shape& input) : Layer<T>(input, input), kind_(kind) {}

  std::string type() const override;
  void forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) override;
  void backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T> y,
                ConstMatrixView<T> dy, MatrixView<T>* dx) override;

 private:
  ActivationKind kind_;
};

}  // namespace mpiddp::nn
