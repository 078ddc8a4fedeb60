#pragma once
// 2-d max pooling (PyTorch's nn.MaxPool2d, dilation 1, floor mode): the padding counts as
// -inf, so a window's maximum is always one of its input values.
#include "mpiddp/nn/layer.hpp"
#include "mpiddp/nn/window2d.hpp"

namespace mpiddp::nn {

// x: (C, H, W) -> y: (C, Ho, Wo) per sample, no parameters.
template <typename T>
class MaxPool2d final : public Layer<T> {
 public:
  MaxPool2d(const Pool2dOptions& options, const Shape& input, const std::string& key);

  std::string type() const override { return "maxpool2d"; }
  // "maxpool2d2", "maxpool2d3s2p1"
  std::string describe() const override { return "maxpool2d" + pool_tag(window_); }
  // Where each output's maximum came from: (outputs, max_batch) int32, written by forward
  // and read by backward.
  size_t scratch_bytes(Index max_batch) const override {
    return static_cast<size_t>(this->outputs() * max_batch) * sizeof(int32_t);
  }
  void bind(const LayerMemory<T>& memory) override {
    argmax_ = reinterpret_cast<int32_t*>(memory.scratch);
  }
  void forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) override;
  // The gradient of each output goes to the first maximum of its window (in row-major
  // order), as PyTorch's; overlapping windows add up.
  void backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T> y,
                ConstMatrixView<T> dy, MatrixView<T>* dx) override;

 private:
  Window2d window_;
  Image image_;
  int32_t* argmax_ = nullptr;  // (outputs, B): the offset of each maximum in its sample (C, H, W)
};

}  // namespace mpiddp::nn
