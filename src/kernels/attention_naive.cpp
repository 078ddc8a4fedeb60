// Attention's naive kernel (kernels/attention_naive.hpp): each head's (T, T) probabilities,
// kept from forward to backward. Legend: kernels/attention_head.hpp.
#include "mpiddp/kernels/attention_naive.hpp"

#include <algorithm>
#include <limits>

#include "mpiddp/kernels/gemm.hpp"

namespace mpiddp::kernels {
// A namespace of its own: a unity build (the sanitizer stage) puts both kernels in one
// translation unit, where their helpers' names would clash.
namespace naive_attention_parts {

template <typename T>
StridedView<T> square(T* values, Index t) {
  return {values, t, t, Eigen::OuterStride<>(t)};
}

template <typename T>
struct Workspace {
  T* d_scores;  // (T, T): the scores' gradient; in forward with dropout, the dropped probabilities
  T* mask;      // (T, T), with dropout
};

template <typename T>
Workspace<T> workspace_of(std::byte* workspace, const AttentionHead& head, bool dropout) {
  Workspace<T> w{};
  w.d_scores = take_scratch_values<T>(workspace, head.t * head.t);
  if (dropout) w.mask = take_scratch_values<T>(workspace, head.t * head.t);
  return w;
}

size_t kept_values(const AttentionHead& head) { return static_cast<size_t>(head.t * head.t); }

template <typename T>
size_t workspace_bytes(const AttentionHead& head, bool dropout) {
  return (dropout ? 2 : 1) * scratch_values_bytes<T>(head.t * head.t);
}

// P(j, i) = softmax over j of q_i . k_j / sqrt(D), the keys after i masked when causal; then
// out = v P, or v (P M) with dropout's mask M (elementwise). P itself is kept undropped, for
// backward's softmax.
template <typename T>
void forward(StridedView<T> out, T* probabilities, ConstStridedView<T> q, ConstStridedView<T> k,
             ConstStridedView<T> v, const AttentionHead& head, const AttentionMask<T>* mask, std::byte* workspace) {
  const Index t = head.t;
  const T scale = attention_scale<T>(head);
  StridedView<T> p = square(probabilities, t);
  multiply_tile<T>(p, k, Op::kTranspose, q, Op::kNone, Accumulate::kOverwrite);
  for (Index i = 0; i < t; ++i) {
    T* column = p.col(i).data();
    const Index keys = head.causal ? i + 1 : t;
    T max = -std::numeric_limits<T>::infinity();
    for (Index j = 0; j < keys; ++j) max = std::max(max, column[j] * scale);
    T sum = 0;
    for (Index j = 0; j < keys; ++j) {
      column[j] = std::exp(column[j] * scale - max);
      sum += column[j];
    }
    const T inv = T(1) / sum;
    for (Index j = 0; j < keys; ++j) column[j] *= inv;
    std::fill(column + keys, column + t, T(0));
  }
  if (!mask) {
    multiply_tile<T>(out, v, Op::kNone, read_only(p), Op::kNone, Accumulate::kOverwrite);
    return;
  }
  const Workspace<T> w = workspace_of<T>(workspace, head, true);
  (*mask)(0, 0, t * t, w.mask);
  StridedView<T> dropped = square(w.d_scores, t);
  dropped = p.cwiseProduct(square(w.mask, t));
  multiply_tile<T>(out, v, Op::kNone, read_only(dropped), Op::kNone, Accumulate::kOverwrite);
}

// With dO the output's gradient: dv = dO P^T, dP = v^T dO, the softmax's
// dS(j, i) = P(j, i) (dP(j, i) - sum_j' P(j', i) dP(j', i)) / sqrt(D), then dq = k dS and
// dk = q dS^T. Masked entries have P = 0, so they pass no gradient. With dropout's mask M the
// output read P M: dv = dO (P M)^T, and dP is v^T dO times M.
template <typename T>
void backward(StridedView<T> dq, StridedView<T> dk, StridedView<T> dv, ConstStridedView<T> d_out,
              ConstStridedView<T> /*out*/, ConstStridedView<T> q, ConstStridedView<T> k, ConstStridedView<T> v,
              const T* probabilities, const AttentionHead& head, const AttentionMask<T>* mask, std::byte* workspace) {
  const Index t = head.t;
  const T scale = attention_scale<T>(head);
  const Workspace<T> w = workspace_of<T>(workspace, head, mask != nullptr);
  const ConstStridedView<T> p(probabilities, t, t, Eigen::OuterStride<>(t));
  StridedView<T> ds = square(w.d_scores, t);
  if (mask) {
    (*mask)(0, 0, t * t, w.mask);
    const StridedView<T> m = square(w.mask, t);
    ds = p.cwiseProduct(m);
    multiply_tile<T>(dv, d_out, Op::kNone, read_only(ds), Op::kTranspose, Accumulate::kOverwrite);
    multiply_tile<T>(ds, v, Op::kTranspose, d_out, Op::kNone, Accumulate::kOverwrite);
    ds = ds.cwiseProduct(m);
  } else {
    multiply_tile<T>(dv, d_out, Op::kNone, p, Op::kTranspose, Accumulate::kOverwrite);
    multiply_tile<T>(ds, v, Op::kTranspose, d_out, Op::kNone, Accumulate::kOverwrite);
  }
  for (Index i = 0; i < t; ++i) {
    const T dot = p.col(i).dot(ds.col(i));
    ds.col(i) = (p.col(i).array() * (ds.col(i).array() - dot) * scale).matrix();
  }
  multiply_tile<T>(dq, k, Op::kNone, read_only(ds), Op::kNone, Accumulate::kOverwrite);
  multiply_tile<T>(dk, q, Op::kNone, read_only(ds), Op::kTranspose, Accumulate::kOverwrite);
}

}  // namespace naive_attention_parts

template <typename T>
AttentionKernel<T> naive_attention() {
  using namespace naive_attention_parts;
  return {&kept_values, &workspace_bytes<T>, &forward<T>, &backward<T>};
}

template AttentionKernel<float> naive_attention<float>();
template AttentionKernel<double> naive_attention<double>();

}  // namespace mpiddp::kernels
