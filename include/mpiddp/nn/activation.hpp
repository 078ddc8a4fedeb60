#pragma once
// Elementwise activations: y = f(x), any shape to the same shape, no parameters.
#include "mpiddp/nn/layer.hpp"

namespace mpiddp::nn {

// kGelu: the exact erf form (PyTorch's default); kGeluTanh: approximate="tanh".
enum class ActivationKind { kTanh, kRelu, kSigmoid, kGelu, kGeluTanh };

template <typename T>
class Activation final : public Layer<T> {
 public:
  Activation(ActivationKind kind, const Shape& input) : Layer<T>(input, input), kind_(kind) {}

  std::string type() const override;
  std::string describe() const override { return kind_ == ActivationKind::kGeluTanh ? "gelutanh" : type(); }
  // relu is a comparison and a select; tanh, sigmoid and gelu call functions whose
  // vectorised forms round otherwise than their scalar ones, so a column's bits could follow
  // its place in the batch.
  bool supports_chunked_pass(Index) const override { return kind_ == ActivationKind::kRelu; }
  void forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) override;
  void backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T> y,
                ConstMatrixView<T> dy, MatrixView<T>* dx) override;

 private:
  ActivationKind kind_;
};

}  // namespace mpiddp::nn
