#pragma once
// 2-d average pooling (PyTorch's nn.AvgPool2d with its defaults: floor mode and
// count_include_pad, so every window divides by kh * kw, padding counted as zeros).
#include "mpiddp/nn/layer.hpp"
#include "mpiddp/nn/window2d.hpp"

namespace mpiddp::nn {

// x: (C, H, W) -> y: (C, Ho, Wo) per sample, no parameters.
template <typename T>
class AvgPool2d final : public Layer<T> {
 public:
  AvgPool2d(const Pool2dOptions& options, const Shape& input, const std::string& key);

  std::string type() const override { return "avgpool2d"; }
  // "avgpool2d2", "avgpool2d3s2p1"
  std::string describe() const override { return "avgpool2d" + pool_tag(window_); }
  void forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) override;
  void backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T> y,
                ConstMatrixView<T> dy, MatrixView<T>* dx) override;

 private:
  Window2d window_;
  Image image_;
};

}  // namespace mpiddp::nn
