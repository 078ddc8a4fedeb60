#pragma once
// Multi-head self-attention as nanoGPT's CausalSelfAttention computes it: (T, C) -> (T, C).
// qkv = c_attn(x), split into q, k, v of C each and each into `heads` heads of D = C / heads;
// per head and sample out = softmax(q k^T / sqrt(D), causal mask) v; the heads side by side
// go through c_proj. Parameters: "c_attn.weight" [3C, C] (q, k, v row blocks), "c_attn.bias"
// [3C], "c_proj.weight" [C, C], "c_proj.bias" [C] (the biases only with `bias`), initialised
// as nn.Linear's (uniform in +-1/sqrt(C)), or with init_std from N(0, init_std^2) and zeros.
// With `dropout` p, the probabilities are dropped and scaled by 1/(1-p) in training, as
// nanoGPT's attn_dropout, with masks by the sample's global position (nn/dropout_mask.hpp).
//
// Scratch, for up to max_batch samples B (values of T): qkv (3C, B T), the heads' outputs
// (C, B T), the attention probabilities (T, T) per head and sample, and in backward their
// gradients' buffers of the same sizes as qkv and the heads' outputs, and one (T, T) (two
// with dropout: the mask of one head). The
// probabilities are the only part that grows with T^2 (issue 34 brings a tiled kernel that
// keeps O(T) per head instead).
#include <optional>
#include <string>

#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/nn/dropout_mask.hpp"
#include "mpiddp/nn/initialization.hpp"
#include "mpiddp/nn/layer.hpp"

namespace mpiddp::nn {

struct AttentionOptions {
  Index heads = 0;
  bool causal = true;
  bool bias = true;
  double dropout = 0.0;  // on the probabilities, as nanoGPT's attn_dropout
  InitStd init;          // the projections' weights N(0, init_std^2), biases zero
  static AttentionOptions parse(io::JsonSection& section);
};

template <typename T>
class Attention final : public Layer<T> {
 public:
  Attention(const AttentionOptions& options, const Shape& input, const std::string& key);

  std::string type() const override { return "attention"; }
  std::string describe() const override;
  std::vector<TensorSpec> parameters() const override;
  size_t scratch_bytes(Index max_batch) const override;
  double multiply_adds_per_sample() const override;
  void gemm_calls(Index batch, std::vector<kernels::GemmCall>& calls) const override;
  void bind(const LayerMemory<T>& memory) override;
  void initialize(Rng& rng) override;
  void forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) override;
  void backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T> y,
                ConstMatrixView<T> dy, MatrixView<T>* dx) override;

 private:
  // Head h of sample b: its (T, T) probabilities, column i the query at position i.
  T* probabilities(Index b, Index h) const { return probabilities_ + (b * heads_ + h) * t_ * t_; }
  // The products of one head of one sample: probabilities from q and k, the output from v.
  // With `dropout`, the probabilities' mask comes from the stream (null in evaluation, or
  // without dropout) at the sample's global position.
  void attend(Index b, Index h, const DropoutStream* dropout, Index position);
  void attend_backward(Index b, Index h, const DropoutStream* dropout, Index position);
  // The pass's dropout stream: none in evaluation or without dropout.
  std::optional<DropoutStream> dropout_stream(const PassContext& context) const;
  // The mask of head h of the sample at position q, into mask_: (T, T) as the probabilities.
  void draw_mask(const DropoutStream& dropout, Index h, Index q);

  Index t_, c_, heads_, d_;  // positions, width, heads, width of a head
  bool causal_, bias_;
  double dropout_;
  T dropout_scale_;  // 1 / (1 - dropout)
  InitStd init_;
  uint64_t salt_;    // fnv1a of the key path: the dropout stream's
  std::string key_;
  T* attn_weight_ = nullptr;  // W_attn^T: (C, 3C); then its bias (3C) with `bias`
  T* attn_bias_ = nullptr;
  T* proj_weight_ = nullptr;  // W_proj^T: (C, C); then its bias (C)
  T* proj_bias_ = nullptr;
  T* attn_weight_grad_ = nullptr, *attn_bias_grad_ = nullptr;
  T* proj_weight_grad_ = nullptr, *proj_bias_grad_ = nullptr;
  // Scratch: qkv_ (3C, B T), heads_out_ (C, B T), probabilities_ (T, T, heads, B), and for
  // backward d_qkv_ (3C, B T), d_heads_out_ (C, B T), d_scores_ (T, T); with dropout, mask_
  // (T, T), one head's at a time: backward draws it again rather than keep every head's.
  T* qkv_ = nullptr, *heads_out_ = nullptr, *probabilities_ = nullptr;
  T* d_qkv_ = nullptr, *d_heads_out_ = nullptr, *d_scores_ = nullptr, *mask_ = nullptr;
};

}  // namespace mpiddp::nn
