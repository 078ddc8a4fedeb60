#pragma once
// PyTorch's nn.Embedding(vocab, dim): token ids (T) -> (T, dim), position t's row of the table
// for its id, features in the last dimension. It takes the ids as integers (nn/batch_input.hpp),
// so it is a model's first layer. Parameters: "weight" [vocab, dim], row v the vector of
// token v, initialised N(0, 1) as PyTorch does.
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/nn/batch_input.hpp"
#include "mpiddp/nn/initialization.hpp"
#include "mpiddp/nn/layer.hpp"

namespace mpiddp::nn {

struct EmbeddingOptions {
  Index vocab = 0;
  Index dim = 0;
  InitStd init;  // absent: N(0, 1), as nn.Embedding
  static EmbeddingOptions parse(io::JsonSection& section);
};

template <typename T>
class Embedding final : public Layer<T>, public TakesTokenIds<T> {
 public:
  Embedding(const EmbeddingOptions& options, const Shape& input, const std::string& key);

  std::string type() const override { return "embedding"; }
  std::string describe() const override;
  std::vector<TensorSpec> parameters() const override;
  void bind(const LayerMemory<T>& memory) override;
  void initialize(Rng& rng) override;
  Index vocabulary() const override { return vocab_; }

  void forward_ids(const PassContext& context, const int32_t* ids, Index batch, MatrixView<T> y) override;
  void backward_ids(const PassContext& context, const int32_t* ids, Index batch, ConstMatrixView<T> dy) override;
  // Values never reach it: the model feeds it ids (std::logic_error).
  void forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) override;
  void backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T> y,
                ConstMatrixView<T> dy, MatrixView<T>* dx) override;

 private:
  Index vocab_, dim_;
  InitStd init_;
  T* weight_ = nullptr;       // [vocab, dim], row-major
  T* weight_grad_ = nullptr;  // the same layout
};

}  // namespace mpiddp::nn
