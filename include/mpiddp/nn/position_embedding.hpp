#pragma once
// A learned position embedding (GPT's wpe): (T, C) -> (T, C), row t of the table added to
// position t of every sample; T may be at most `positions`. Parameters: "weight"
// [positions, C], N(0, 1) as nn.Embedding's. The rows past T are kept and untouched.
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/nn/initialization.hpp"
#include "mpiddp/nn/layer.hpp"

namespace mpiddp::nn {

struct PositionEmbeddingOptions {
  Index positions = 0;
  InitStd init;  // absent: N(0, 1), as an nn.Embedding table
  static PositionEmbeddingOptions parse(io::JsonSection& section);
};

template <typename T>
class PositionEmbedding final : public Layer<T> {
 public:
  PositionEmbedding(const PositionEmbeddingOptions& options, const Shape& input, const std::string& key);

  std::string type() const override { return "position_embedding"; }
  std::string describe() const override { return "position_embedding" + std::to_string(positions_); }
  std::vector<TensorSpec> parameters() const override;
  void bind(const LayerMemory<T>& memory) override;
  void initialize(Rng& rng) override;
  void forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) override;
  void backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T> y,
                ConstMatrixView<T> dy, MatrixView<T>* dx) override;

 private:
  Index positions_, width_;
  InitStd init_;   // the table's rows, and C
  T* weight_ = nullptr;       // [positions, C], row-major
  T* weight_grad_ = nullptr;
};

}  // namespace mpiddp::nn
