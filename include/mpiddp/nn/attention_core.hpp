#pragma once
// The core of attention, per head of one sample: from q, k and v to the head's output, and
// back. The attention layer (nn/attention.hpp) does the projections around it and picks one
// of two algorithms (AttentionOptions::algorithm):
//   naive  the (T, T) probabilities of every head and sample kept from forward to backward
//          (nn/attention_naive.cpp);
//   tiled  FlashAttention's: the keys in blocks with a running softmax, so that only each
//          query's log-sum-exp is kept, O(T) per head and sample; backward computes each
//          tile's probabilities again from it (nn/attention_tiled.cpp).
// Both give the same values to float rounding. Neither looks at other samples, so a sample's
// bits do not follow the batch it is in (nor the world size).
#include <cmath>
#include <cstddef>
#include <memory>
#include <string>

#include "mpiddp/core/types.hpp"
#include "mpiddp/nn/dropout_mask.hpp"

namespace mpiddp::nn {

enum class AttentionAlgorithm { kNaive, kTiled };

// What the core needs to know of its layer.
struct AttentionGeometry {
  Index t = 0, c = 0, heads = 0, d = 0;  // positions, width, heads, width of a head
  bool causal = true;
  double dropout = 0.0;  // on the probabilities, in training
};

// The layer's buffers the core reads and writes, for up to max_batch samples of T positions:
// qkv (3C, B T) and the heads' outputs (C, B T), and their gradients of the same sizes.
template <typename T>
struct AttentionBuffers {
  T* qkv = nullptr;
  T* heads_out = nullptr;
  T* d_qkv = nullptr;
  T* d_heads_out = nullptr;
};

template <typename T>
class AttentionCore {
 public:
  using Strided = Eigen::Map<Matrix<T>, 0, Eigen::OuterStride<>>;
  using ConstStrided = Eigen::Map<const Matrix<T>, 0, Eigen::OuterStride<>>;

  explicit AttentionCore(const AttentionGeometry& geometry)
      : g_(geometry),
        scale_(T(1) / std::sqrt(static_cast<T>(geometry.d))),
        dropout_scale_(static_cast<T>(1.0 / (1.0 - geometry.dropout))) {}
  virtual ~AttentionCore() = default;

  // Its scratch, for up to max_batch samples computed by up to `workers` threads at once: what
  // it keeps from forward to backward, then a workspace of its own for each worker (what one
  // call needs while it runs), so that the heads can be computed in parallel.
  size_t scratch_bytes(Index max_batch, int workers) const {
    return kept_bytes(max_batch) + static_cast<size_t>(workers) * workspace_bytes();
  }
  void bind(std::byte* scratch, Index max_batch, int workers, const AttentionBuffers<T>& buffers) {
    buffers_ = buffers;
    bind_kept(scratch, max_batch);
    scratch += kept_bytes(max_batch);
    for (int w = 0; w < workers; ++w, scratch += workspace_bytes()) bind_workspace(w, scratch);
  }
  // Head h of sample b: from qkv to heads_out, on worker's workspace. dropout: null in
  // evaluation or without dropout; position: the sample's global position (the masks' counter).
  virtual void forward(Index b, Index h, int worker, const DropoutStream* dropout, Index position) = 0;
  // From d_heads_out (and the forward's buffers) to the head's part of d_qkv, written.
  virtual void backward(Index b, Index h, int worker, const DropoutStream* dropout, Index position) = 0;

 protected:
  // Each a multiple of 64 bytes (scratch_values_bytes), so that every piece stays aligned.
  virtual size_t kept_bytes(Index max_batch) const = 0;
  virtual size_t workspace_bytes() const = 0;
  virtual void bind_kept(std::byte* scratch, Index max_batch) = 0;
  virtual void bind_workspace(int worker, std::byte* scratch) = 0;

  // Head h of sample b's q, k and v: (D, T), a position every 3C values.
  ConstStrided q(Index b, Index h) const { return {buffers_.qkv + qkv_offset(b, h, 0), g_.d, g_.t, Eigen::OuterStride<>(3 * g_.c)}; }
  ConstStrided k(Index b, Index h) const { return {buffers_.qkv + qkv_offset(b, h, 1), g_.d, g_.t, Eigen::OuterStride<>(3 * g_.c)}; }
  ConstStrided v(Index b, Index h) const { return {buffers_.qkv + qkv_offset(b, h, 2), g_.d, g_.t, Eigen::OuterStride<>(3 * g_.c)}; }
  Strided dq(Index b, Index h) const { return {buffers_.d_qkv + qkv_offset(b, h, 0), g_.d, g_.t, Eigen::OuterStride<>(3 * g_.c)}; }
  Strided dk(Index b, Index h) const { return {buffers_.d_qkv + qkv_offset(b, h, 1), g_.d, g_.t, Eigen::OuterStride<>(3 * g_.c)}; }
  Strided dv(Index b, Index h) const { return {buffers_.d_qkv + qkv_offset(b, h, 2), g_.d, g_.t, Eigen::OuterStride<>(3 * g_.c)}; }
  // The head's output and its gradient: (D, T), a position every C values.
  Strided out(Index b, Index h) const { return {buffers_.heads_out + out_offset(b, h), g_.d, g_.t, Eigen::OuterStride<>(g_.c)}; }
  ConstStrided d_out(Index b, Index h) const {
    return {buffers_.d_heads_out + out_offset(b, h), g_.d, g_.t, Eigen::OuterStride<>(g_.c)};
  }
  // Dropout's mask of head h for query i, keys first .. first + count - 1, of the sample at
  // position `position`: the values h T T + i T + first .. of its counter, so that every
  // algorithm and tiling draws the same mask for the same probability.
  void draw_mask(const DropoutStream& dropout, Index h, Index i, Index first, Index count, Index position,
                 T* mask) const {
    dropout.fill(mask, (h * g_.t + i) * g_.t + first, count, position, g_.dropout, dropout_scale_);
  }

  AttentionGeometry g_;
  AttentionBuffers<T> buffers_;
  T scale_;          // 1 / sqrt(D)
  T dropout_scale_;  // 1 / (1 - dropout)

 private:
  Index out_offset(Index b, Index h) const { return b * g_.t * g_.c + h * g_.d; }
  // part: 0 q, 1 k, 2 v, in both qkv and d_qkv.
  Index qkv_offset(Index b, Index h, Index part) const { return b * g_.t * 3 * g_.c + part * g_.c + h * g_.d; }
};

template <typename T>
std::unique_ptr<AttentionCore<T>> make_naive_attention(const AttentionGeometry& geometry);
template <typename T>
std::unique_ptr<AttentionCore<T>> make_tiled_attention(const AttentionGeometry& geometry);

}  // namespace mpiddp::nn
