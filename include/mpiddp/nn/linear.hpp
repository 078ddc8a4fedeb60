#pragma once
#include <string>

#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/kernels/gemm.hpp"
#include "mpiddp/nn/initialization.hpp"
#include "mpiddp/nn/layer.hpp"

namespace mpiddp::nn {

struct LinearOptions {
  Index out = 0;
  bool bias = true;
  std::string tied_to;  // another layer's tensor used as the weight ("0.weight"); empty: its own
  std::string key;      // the layer's config key, for the tie's messages
  InitStd init;
  static LinearOptions parse(io::JsonSection& section);
  // Out outputs, every other key its default.
  static LinearOptions of_width(Index out) {
    LinearOptions options;
    options.out = out;
    return options;
  }
};

// y = W x + b, W: [O, F] row-major as in PyTorch (read as W^T: (F, O) column-major), b: (O).
// Parameters: "weight" [O, F], then "bias" [O] (without `bias`, none). As nn.Linear, it acts
// on the last dimension: a flat input (F) -> (O), a sequence (T, F) -> (T, O), each position
// alike. With tied_to, W is that tensor of an earlier layer (a GPT's head and its token
// embedding, [vocab, C] both): the layer owns only its bias, and adds W's gradient to the
// owner's (TiedTensor in nn/layer.hpp).
template <typename T>
class Linear final : public Layer<T> {
 public:
  Linear(const LinearOptions& options, const Shape& input, const std::string& key);
  Linear(Index inputs, Index outputs) : Linear(LinearOptions::of_width(outputs), Shape{inputs}, "linear") {}

  std::string type() const override { return "linear"; }
  std::string describe() const override;
  std::vector<TensorSpec> parameters() const override;
  std::vector<TiedTensor> tied_tensors() const override;
  double multiply_adds_per_sample() const override {
    return static_cast<double>(in_) * static_cast<double>(out_) * static_cast<double>(positions_);
  }
  void gemm_calls(Index batch, std::vector<kernels::GemmCall>& calls) const override;
  bool supports_chunked_pass(Index chunk) const override;
  // Its own tensors' (a tied weight's gradient is always added to its owner's).
  bool can_overwrite_gradients() const override { return true; }
  void bind(const LayerMemory<T>& memory) override;
  // PyTorch's default: W and b uniform in [-1/sqrt(F), 1/sqrt(F)), weights first, row by row;
  // with init_std, W from N(0, init_std^2) and b zero. A tied W is its owner's to initialise.
  void initialize(Rng& rng) override;
  void forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) override;
  void backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T> y,
                ConstMatrixView<T> dy, MatrixView<T>* dx) override;

 private:
  // A batch of (positions, features) samples as (features, B * positions): one column per
  // position, which is how a sample's column already lies in memory (features last).
  template <typename View>
  View by_position(View v) const { return View(v.data(), v.rows() / positions_, v.cols() * positions_); }

  Index in_, out_;       // F and O: the last dimension of the input and of the output
  Index positions_;      // T for a sequence (T, F), else 1
  bool has_bias_;
  std::string tied_to_, key_;
  InitStd init_;
  T* weight_ = nullptr;       // W^T: (F, O)
  T* bias_ = nullptr;         // (O), or null without bias
  T* weight_grad_ = nullptr;  // dW^T: (F, O)
  T* bias_grad_ = nullptr;    // db: (O)
  // W^T in the products' precision, made by forward for backward (Note [operands converted
  // once] in kernels/gemm.hpp).
  kernels::OperandCopy<T> weight_copy_;
};

}  // namespace mpiddp::nn
