#pragma once
// What attention's two kernels share (kernels/attention_naive.hpp, kernels/attention_tiled.hpp):
// one head of one sample, from its q, k and v to its output and back.
//
// Legend: T positions, D the width of a head. q, k, v, the output and their gradients are each
// (D, T), column i the position i, with `stride` values from one position to the next: views
// into the layer's (3C, B T) and (C, B T) buffers, so that no head is copied out. A head's
// probabilities P are (T, T) keys by queries: column i holds query i's softmax over the keys.
#include <Eigen/Core>
#include <cmath>
#include <cstddef>

#include "mpiddp/core/scratch.hpp"
#include "mpiddp/core/types.hpp"

namespace mpiddp::kernels {

struct AttentionHead {
  Index t = 0, d = 0;  // positions, width of the head
  bool causal = true;  // query i sees the keys 0 .. i only
};

// The softmax's temperature: 1 / sqrt(D), rounded in T as every release has computed it.
template <typename T>
T attention_scale(const AttentionHead& head) {
  return T(1) / std::sqrt(static_cast<T>(head.d));
}

// Dropout on the probabilities, drawn rather than stored: fill(source, query, first, count,
// mask) writes the mask's values query T + first .. query T + first + count - 1 of the head
// (0, or the kept probabilities' scale 1 / (1 - p)). A count may run past the query's keys into
// the next queries', so the naive kernel draws a whole (T, T) mask in one call and the tiled
// one a tile's column at a time: the same probabilities are dropped by both.
template <typename T>
struct AttentionMask {
  void (*fill)(const void* source, Index query, Index first, Index count, T* mask) = nullptr;
  const void* source = nullptr;
  void operator()(Index query, Index first, Index count, T* mask) const { fill(source, query, first, count, mask); }
};

// One of the algorithms, as the attention layer calls it for each head of each sample:
//   kept_values(head)              the values kept from forward to backward, per head and sample
//   workspace_bytes(head, dropout) what one call needs while it runs (one per worker thread)
//   forward(out, kept, q, k, v, head, mask, workspace)
//                                  out: (D, T) written; kept written; mask null without dropout
//   backward(dq, dk, dv, d_out, out, q, k, v, kept, head, mask, workspace)
//                                  dq, dk, dv: (D, T) written, from d_out: (D, T) and forward's
//                                  out and kept; the same mask as forward's
// Neither looks at another head or sample, so a sample's bits follow neither its batch nor the
// world size, and heads may run on different threads.
template <typename T>
struct AttentionKernel {
  size_t (*kept_values)(const AttentionHead& head);
  size_t (*workspace_bytes)(const AttentionHead& head, bool dropout);
  void (*forward)(StridedView<T> out, T* kept, ConstStridedView<T> q, ConstStridedView<T> k, ConstStridedView<T> v,
                  const AttentionHead& head, const AttentionMask<T>* mask, std::byte* workspace);
  void (*backward)(StridedView<T> dq, StridedView<T> dk, StridedView<T> dv, ConstStridedView<T> d_out,
                   ConstStridedView<T> out, ConstStridedView<T> q, ConstStridedView<T> k, ConstStridedView<T> v,
                   const T* kept, const AttentionHead& head, const AttentionMask<T>* mask, std::byte* workspace);
};

}  // namespace mpiddp::kernels
