#pragma once
// PyTorch's nn.LayerNorm(C) over the last dimension: each row of C values (a flat sample, or
// each position of a sequence (T, C)) becomes (x - mean) / sqrt(var + eps) * weight + bias,
// with the biased variance. Parameters (affine): "weight" [C] (ones), "bias" [C] (zeros).
// Scratch: each row's mean and 1/sqrt(var + eps), kept from forward to backward.
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/nn/initialization.hpp"
#include "mpiddp/nn/layer.hpp"

namespace mpiddp::nn {

struct LayerNormOptions {
  double eps = 1e-5;
  bool affine = true;
  static LayerNormOptions parse(io::JsonSection& section);
};

template <typename T>
class LayerNorm final : public Layer<T> {
 public:
  LayerNorm(const LayerNormOptions& options, const Shape& input, const std::string& key);

  std::string type() const override { return "layernorm"; }
  // eps and affine decide the values, not the tensors' shapes; affine decides whether there are any.
  std::string describe() const override { return affine_ ? "layernorm" : "layernorm_plain"; }
  std::vector<TensorSpec> parameters() const override;
  size_t scratch_bytes(Index max_batch) const override;
  void bind(const LayerMemory<T>& memory) override;
  void initialize(Rng& rng) override;
  void forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) override;
  void backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T> y,
                ConstMatrixView<T> dy, MatrixView<T>* dx) override;

 private:
  Index width_, rows_;  // C, and the rows of C per sample
  double eps_;
  bool affine_;
  T* weight_ = nullptr;  // [C], then bias [C]
  T* grad_ = nullptr;    // the same layout
  T* mean_ = nullptr;    // (rows, max_batch) of the last forward
  T* rstd_ = nullptr;    // (rows, max_batch): 1 / sqrt(var + eps)
};

}  // namespace mpiddp::nn
