#pragma once
// The mean of each channel over the image: PyTorch's nn.AdaptiveAvgPool2d(1) followed by
// nn.Flatten(), so a linear layer can follow.
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/nn/layer.hpp"

namespace mpiddp::nn {

struct GlobalAvgPoolOptions {
  static GlobalAvgPoolOptions parse(io::JsonSection&) { return {}; }  // no keys
};

// x: (C, H, W) -> y: (C) per sample, no parameters.
template <typename T>
class GlobalAvgPool final : public Layer<T> {
 public:
  GlobalAvgPool(const GlobalAvgPoolOptions& options, const Shape& input, const std::string& key);

  std::string type() const override { return "global_avgpool"; }
  void forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) override;
  void backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T> y,
                ConstMatrixView<T> dy, MatrixView<T>* dx) override;
};

}  // namespace mpiddp::nn
