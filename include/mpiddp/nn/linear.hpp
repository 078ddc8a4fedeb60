#pragma once
#include "mpiddp/nn/layer.hpp"

namespace mpiddp::nn {

// y = W x + b, W: [O, F] row-major as in PyTorch (read as W^T: (F, O) column-major), b: (O).
// Parameter layout inside the flat buffer: the O*F weights, then the O biases.
template <typename T>
class Linear final : public Layer<T> {
 public:
  Linear(Index inputs, Index outputs) : inputs_(inputs), outputs_(outputs) {}

  std::string type() const override { return "linear"; }
  Index outputs(Index) const override { return outputs_; }
  Index parameter_count() const override { return outputs_ * inputs_ + outputs_; }
  void bind(T* params, T* grads) override;
  // PyTorch's default: W and b uniform in [-1/sqrt(F), 1/sqrt(F)), weights first, row by row.
  void initialize(Rng& rng) override;
  void forward(ConstMatrixView<T> x, MatrixView<T> y) const override;
  void backward(ConstMatrixView<T> x, ConstMatrixView<T> y, ConstMatrixView<T> dy,
                MatrixView<T>* dx) override;

 private:
  Index inputs_, outputs_;
  T* weight_ = nullptr;       // W^T: (F, O)
  T* bias_ = nullptr;         // (O)
  T* weight_grad_ = nullptr;  // dW^T: (F, O)
  T* bias_grad_ = nullptr;    // (O)
};

}  // namespace mpiddp::nn
