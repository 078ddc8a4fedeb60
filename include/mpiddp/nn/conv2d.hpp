#pragma once
// 2-d convolution (PyTorch's nn.Conv2d, dilation 1, groups 1, zero padding), by im2col and
// one matrix product per sample.
//
// Dimension letters: C input channels, H x W the input image, O output channels,
// Ho x Wo the output image, P = Ho * Wo output positions, K = C * kh * kw taps per output.
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/nn/initialization.hpp"
#include "mpiddp/nn/layer.hpp"
#include "mpiddp/nn/window2d.hpp"

namespace mpiddp::nn {

struct Conv2dOptions {
  Index out = 0;
  Window2d window;  // stride 1 and padding 0 unless given
  bool bias = true;
  InitStd init;  // weights N(0, init_std^2) and bias zero; absent, nn.Conv2d's default
  static Conv2dOptions parse(io::JsonSection& section);
};

// x: (C, H, W) -> y: (O, Ho, Wo) per sample.
// Parameters: "weight" [O, C, kh, kw] row-major as in PyTorch, then "bias" [O] (when bias).
// Read column-major, the weight is W^T: (K, O), so that with one sample's im2col matrix
// cols: (P, K) the product y = cols W^T: (P, O) column-major is its (O, Ho, Wo) tensor.
template <typename T>
class Conv2d final : public Layer<T> {
 public:
  Conv2d(const Conv2dOptions& options, const Shape& input, const std::string& key);

  std::string type() const override { return "conv2d"; }
  // "conv2d16k3s1p1", "conv2d8k3x5s2x1p1x2nb" (nb: no bias).
  std::string describe() const override;
  std::vector<TensorSpec> parameters() const override;
  // One sample's im2col matrix (P, K), reused for its gradient in backward; none for a
  // 1x1 convolution of stride 1 without padding, whose im2col matrix is the input itself.
  size_t scratch_bytes(Index max_batch) const override;
  double multiply_adds_per_sample() const override {
    return static_cast<double>(positions()) * static_cast<double>(options_.out) *
           static_cast<double>(taps());
  }
  void gemm_calls(Index batch, std::vector<kernels::GemmCall>& calls) const override;
  void bind(const LayerMemory<T>& memory) override;
  // PyTorch's default (kaiming_uniform with a = sqrt 5): weight and bias uniform in
  // [-1/sqrt(K), 1/sqrt(K)), the weight first in memory order, then the bias.
  void initialize(Rng& rng) override;
  void forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) override;
  void backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T> y,
                ConstMatrixView<T> dy, MatrixView<T>* dx) override;

 private:
  Index positions() const { return out_size_.h * out_size_.w; }  // P
  Index taps() const {                                           // K
    return image_.channels * options_.window.kernel.h * options_.window.kernel.w;
  }
  // A 1x1 kernel, stride 1, no padding: cols (P, K) = x (H*W, C) column-major, as it is.
  bool input_is_cols() const;
  // x: (C, H, W) -> cols: (P, K), column (c, i, j) holding tap (i, j) of channel c at every
  // output position, zero where it falls on the padding.
  void im2col(const T* x, T* cols) const;
  // The transpose: dcols: (P, K) -> dx: (C, H, W), every tap's gradient added to the input
  // value it read; dx is overwritten, and dcols's values on the padding may be zeroed.
  void col2im(T* dcols, T* dx) const;
  // Note [rows that run on] in conv2d.cpp: output k of a tap's column reads input k + offset
  // of its plane, for k in [begin, end).
  struct Run {
    Index begin = 0, end = 0, offset = 0;
  };
  Run tap_run(TapRange rows, Index i, Index shift) const;
  // Zeroes a run-on tap column's values at the ends of output rows [rows.begin, rows.end)
  // outside `inside`: the ones its run read from the neighbouring row.
  void zero_row_ends(T* col, TapRange rows, TapRange inside) const;

  Conv2dOptions options_;
  Image image_;
  Pair2d out_size_;
  std::vector<TapRange> row_taps_;     // (kh): output rows whose tap row i is inside the input
  std::vector<TapRange> column_taps_;  // (kw): output columns whose tap column j is inside
  bool rows_run_on_ = false;           // stride 1 and Wo == W: Note [rows that run on]
  T* weight_ = nullptr;                // W^T: (K, O)
  T* bias_ = nullptr;                  // (O), null without bias
  T* weight_grad_ = nullptr;           // dW^T: (K, O)
  T* bias_grad_ = nullptr;             // (O)
  T* cols_ = nullptr;                  // (P, K), one sample
};

}  // namespace mpiddp::nn
