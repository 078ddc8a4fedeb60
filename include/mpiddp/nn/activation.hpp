#pragma once
// Elementwise activations: y = f(x), shape (F, B) -> (F, B), no parameters.
#include "mpiddp/nn/layer.hpp"

namespace mpiddp::nn {

enum class ActivationKind { kTanh, kRelu, kSigmoid, kGelu };

template <typename T>
class Activation final : public Layer<T> {
 public:
  explicit Activation(ActivationKind kind) : kind_(kind) {}

  std::string type() const override;
  Index outputs(Index inputs) const override { return inputs; }
  void forward(ConstMatrixView<T> x, MatrixView<T> y) const override;
  void backward(ConstMatrixView<T> x, ConstMatrixView<T> y, ConstMatrixView<T> dy,
                MatrixView<T>* dx) override;

 private:
  ActivationKind kind_;
};

}  // namespace mpiddp::nn
