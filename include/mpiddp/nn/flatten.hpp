#pragma once
// PyTorch's nn.Flatten(): (C, H, W) -> (C * H * W) in PyTorch's order. A sample's column
// already holds its tensor in that order (nn/shape.hpp), so only the shape changes; the
// values are copied into the next layer's input as they are.
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/nn/layer.hpp"

namespace mpiddp::nn {

struct FlattenOptions {
  static FlattenOptions parse(io::JsonSection&) { return {}; }  // no keys
};

// x: any shape -> y: (size of the shape) per sample; on a flat input it is the identity.
template <typename T>
class Flatten final : public Layer<T> {
 public:
  Flatten(const FlattenOptions& options, const Shape& input, const std::string& key);

  std::string type() const override { return "flatten"; }
  bool supports_chunked_pass(Index) const override { return true; }  // a copy
  void forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) override;
  void backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T> y,
                ConstMatrixView<T> dy, MatrixView<T>* dx) override;
};

}  // namespace mpiddp::nn
