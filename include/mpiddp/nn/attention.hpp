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
// The layer keeps the projections and the memory layout; each head of each sample goes from
// q, k, v to its output through one of two kernels (kernels/attention_head.hpp): `naive` keeps
// each head's (T, T) probabilities per sample, `tiled` only each query's log-sum-exp; `auto`
// takes the one measured faster for the sequence's length (attention_algorithm below,
// docs/benchmarks.md). Both give the same values to float rounding.
//
// Scratch, for up to max_batch samples B (values of T): qkv (3C, B T), the heads' outputs
// (C, B T), and in backward their gradients' buffers of the same sizes; then what the kernel
// keeps per head and sample, (kept, heads, B); then one kernel workspace per worker thread.
//
// With several compute threads in a rank (`threads`), the heads of the batch's samples are
// shared out among them, each head computed whole by one thread: the same bits as one thread.
#include <optional>
#include <string>

#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/kernels/attention_head.hpp"
#include "mpiddp/kernels/gemm.hpp"
#include "mpiddp/nn/dropout_mask.hpp"
#include "mpiddp/nn/initialization.hpp"
#include "mpiddp/nn/layer.hpp"

namespace mpiddp::nn {

enum class AttentionAlgorithm { kNaive, kTiled };

struct AttentionOptions {
  Index heads = 0;
  bool causal = true;
  bool bias = true;
  double dropout = 0.0;  // on the probabilities, as nanoGPT's attn_dropout
  InitStd init;          // the projections' weights N(0, init_std^2), biases zero
  std::string algorithm = "auto";  // "auto" | "naive" | "tiled"
  static AttentionOptions parse(io::JsonSection& section);
};

// The algorithm `auto` picks for T positions (a rule, so that the same model has the same
// bits on every machine of a kind): tiled from kTiledAttentionFrom positions on.
inline constexpr Index kTiledAttentionFrom = 128;
AttentionAlgorithm attention_algorithm(const std::string& configured, Index positions);

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
  // The pass's dropout stream: none in evaluation or without dropout.
  std::optional<DropoutStream> dropout_stream(const PassContext& context) const;
  // The kernel's workspaces for max_batch samples: one per core this process may run on, at
  // most one per head of the batch.
  int workers(Index max_batch) const;
  // Head h of sample b's q, k or v (part 0, 1, 2) in qkv_ (or its gradient in d_qkv_): (D, T),
  // a position every 3C values; its output (or the output's gradient): (D, T), every C.
  StridedView<T> head_of_qkv(T* qkv, Index b, Index h, Index part) const;
  StridedView<T> head_of_out(T* heads_out, Index b, Index h) const;
  // Head h of sample b's q, k or v as forward made them, for the kernel to read.
  ConstStridedView<T> qkv_head(Index b, Index h, Index part) const { return read_only(head_of_qkv(qkv_, b, h, part)); }
  // What the kernel keeps of head h of sample b, and worker's workspace.
  T* kept(Index b, Index h) const { return kept_ + (b * heads_ + h) * static_cast<Index>(kernel_.kept_values(head_)); }
  std::byte* workspace(int worker) const {
    return workspaces_ + static_cast<size_t>(worker) * kernel_.workspace_bytes(head_, dropout_ > 0.0);
  }
  T dropout_scale() const { return static_cast<T>(1.0 / (1.0 - dropout_)); }
  // The dropout mask source of head h of the sample at `position` (AttentionMask).
  struct HeadDropout {
    const DropoutStream* stream;
    Index first;  // h T T: the head's first value of the sample's counter
    Index t;
    Index position;
    double p;
    T scale;  // 1 / (1 - p)
    static void fill(const void* source, Index query, Index first, Index count, T* mask);
  };
  // Head h of sample b's mask source in a pass with `dropout` (its stream null without).
  HeadDropout head_dropout(const std::optional<DropoutStream>& dropout, const PassContext& context, Index b,
                           Index h) const {
    return {dropout ? &*dropout : nullptr, h * t_ * t_, t_, context.position(b), dropout_, dropout_scale()};
  }
  // pass(b, h, worker) for every head of every sample of the batch: over the rank's compute
  // threads (core/threads.hpp), each head on one thread with its own workspace, so the bits
  // are the same on any number of threads.
  template <typename HeadPass>
  void for_each_head(Index batch, const HeadPass& pass) const;

  Index t_, c_, heads_, d_;  // positions, width, heads, width of a head
  bool causal_, bias_;
  double dropout_;
  InitStd init_;
  uint64_t salt_;    // fnv1a of the key path: the dropout stream's
  std::string key_;
  T* attn_weight_ = nullptr;  // W_attn^T: (C, 3C); then its bias (3C) with `bias`
  T* attn_bias_ = nullptr;
  T* proj_weight_ = nullptr;  // W_proj^T: (C, C); then its bias (C)
  T* proj_bias_ = nullptr;
  T* attn_weight_grad_ = nullptr, *attn_bias_grad_ = nullptr;
  T* proj_weight_grad_ = nullptr, *proj_bias_grad_ = nullptr;
  // The weights in the products' precision, made by forward for backward (Note [operands
  // converted once] in kernels/gemm.hpp).
  kernels::OperandCopy<T> attn_weight_copy_, proj_weight_copy_;
  kernels::AttentionHead head_;
  kernels::AttentionKernel<T> kernel_;
  // Scratch: qkv_ (3C, B T), heads_out_ (C, B T), and for backward d_qkv_ (3C, B T),
  // d_heads_out_ (C, B T); kept_ (kept, heads, B); then workers_ workspaces of the kernel's.
  T* qkv_ = nullptr, *heads_out_ = nullptr, *d_qkv_ = nullptr, *d_heads_out_ = nullptr;
  T* kept_ = nullptr;
  std::byte* workspaces_ = nullptr;
  int workers_ = 1;
};

}  // namespace mpiddp::nn
