// Attention's tiled kernel (kernels/attention_tiled.hpp), as FlashAttention computes it: no
// (T, T) matrix in memory. Legend: kernels/attention_head.hpp.
//
// Note [the running softmax]
// Forward takes the queries in blocks and, for each block, the keys in blocks. A tile's
// scores s = k^T q / sqrt(D) (keys by queries) update each query's running maximum m and
// running sum l of exp(s - m); the output so far is rescaled by exp(m_old - m_new) and gains
// v exp(s - m_new). After the last key block the output is divided by l, and the query's
// log-sum-exp L = m + log l is all that is kept for backward: O(T) per head and sample.
// Backward walks the same tiles, key block by key block, and computes each tile's
// probabilities again as exp(s - L); with D_i = dO_i . O_i (the softmax's sum over keys of
// P dP, since O = P v), the scores' gradient is P (dP - D_i) / sqrt(D), so no row of the
// whole matrix is needed at once. Dropout's masks are drawn per tile from the same counter
// as the naive kernel's (AttentionMask): the same probabilities are dropped. The sum l counts
// the probabilities before dropout, as the softmax does; the output reads the dropped ones,
// and D_i = dO_i . O_i still holds, O being the dropped output.
//
// A causal tile whose keys all lie after a query leaves that query alone; the first key
// block holds key 0, which every query sees, so m is finite from the first tile on.
#include "mpiddp/kernels/attention_tiled.hpp"

#include <algorithm>
#include <limits>

#include "mpiddp/kernels/gemm.hpp"

namespace mpiddp::kernels {
// A namespace of its own: a unity build (the sanitizer stage) puts both kernels in one
// translation unit, where their helpers' names would clash.
namespace tiled_attention_parts {

template <typename T>
using Column = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;

Index tile_of(const AttentionHead& head) { return std::min(kAttentionTile, head.t); }

// Columns first .. first + count - 1 of a head's matrix, as a view of their own.
template <typename T>
ConstStridedView<T> columns(ConstStridedView<T> m, Index first, Index count) {
  return {m.data() + first * m.outerStride(), m.rows(), count, Eigen::OuterStride<>(m.outerStride())};
}
template <typename T>
StridedView<T> columns(StridedView<T> m, Index first, Index count) {
  return {m.data() + first * m.outerStride(), m.rows(), count, Eigen::OuterStride<>(m.outerStride())};
}
// A tile's (rows, cols) values, packed.
template <typename T>
StridedView<T> tile(T* values, Index rows, Index cols) {
  return {values, rows, cols, Eigen::OuterStride<>(rows)};
}

template <typename T>
struct Workspace {
  T* scores;       // (tile, tile): scores, then probabilities, then their gradient
  T* d_scores;     // (tile, tile)
  T* mask;         // (tile, tile), with dropout
  T* running_max;  // (tile)
  T* running_sum;  // (tile)
  T* row_dots;     // (T): D_i
};

template <typename T>
Workspace<T> workspace_of(std::byte* workspace, const AttentionHead& head, bool dropout) {
  const Index tile = tile_of(head);
  Workspace<T> w{};
  w.scores = take_scratch_values<T>(workspace, tile * tile);
  w.d_scores = take_scratch_values<T>(workspace, tile * tile);
  if (dropout) w.mask = take_scratch_values<T>(workspace, tile * tile);
  w.running_max = take_scratch_values<T>(workspace, tile);
  w.running_sum = take_scratch_values<T>(workspace, tile);
  w.row_dots = take_scratch_values<T>(workspace, head.t);
  return w;
}

size_t kept_values(const AttentionHead& head) { return static_cast<size_t>(head.t); }

template <typename T>
size_t workspace_bytes(const AttentionHead& head, bool dropout) {
  const Index tile = tile_of(head);
  return (dropout ? 3 : 2) * scratch_values_bytes<T>(tile * tile) + 2 * scratch_values_bytes<T>(tile) +
         scratch_values_bytes<T>(head.t);
}

// How many of the keys j0 .. j0 + nk - 1 query i sees: all, or when causal those up to i.
Index visible_keys(const AttentionHead& head, Index i, Index j0, Index nk) {
  return head.causal ? std::clamp(i - j0 + 1, Index(0), nk) : nk;
}

// The tile's mask (keys by queries), query by query.
template <typename T>
StridedView<T> draw_masks(const AttentionMask<T>& mask, T* values, Index i0, Index nq, Index j0, Index nk) {
  for (Index c = 0; c < nq; ++c) mask(i0 + c, j0, nk, values + c * nk);
  return tile(values, nk, nq);
}

template <typename T>
void forward(StridedView<T> out, T* log_sum_exp, ConstStridedView<T> q, ConstStridedView<T> k,
             ConstStridedView<T> v, const AttentionHead& head, const AttentionMask<T>* mask, std::byte* workspace) {
  const Index t = head.t, tile_size = tile_of(head);
  const T scale = attention_scale<T>(head);
  const Workspace<T> w = workspace_of<T>(workspace, head, mask != nullptr);
  for (Index i0 = 0; i0 < t; i0 += tile_size) {
    const Index nq = std::min(tile_size, t - i0);
    const Index key_end = head.causal ? i0 + nq : t;
    StridedView<T> out_block = columns(out, i0, nq);
    out_block.setZero();
    std::fill(w.running_max, w.running_max + nq, -std::numeric_limits<T>::infinity());
    std::fill(w.running_sum, w.running_sum + nq, T(0));
    for (Index j0 = 0; j0 < key_end; j0 += tile_size) {
      const Index nk = std::min(tile_size, key_end - j0);
      StridedView<T> p = tile(w.scores, nk, nq);
      multiply_tile<T>(p, columns(k, j0, nk), Op::kTranspose, columns(q, i0, nq), Op::kNone, Accumulate::kOverwrite);
      for (Index c = 0; c < nq; ++c) {
        T* column = p.col(c).data();
        const Index keys = visible_keys(head, i0 + c, j0, nk);
        if (keys > 0) {
          Column<T> scores(column, keys);
          const T block_max = scores.maxCoeff() * scale;
          const T new_max = std::max(w.running_max[c], block_max);
          const T rescale = std::exp(w.running_max[c] - new_max);  // 0 on the first tile
          scores = (scores * scale - new_max).exp();
          w.running_sum[c] = w.running_sum[c] * rescale + scores.sum();
          if (rescale != T(1)) out.col(i0 + c) *= rescale;
          w.running_max[c] = new_max;
        }
        std::fill(column + keys, column + nk, T(0));
      }
      if (mask) p = p.cwiseProduct(draw_masks(*mask, w.mask, i0, nq, j0, nk));
      multiply_tile<T>(out_block, columns(v, j0, nk), Op::kNone, read_only(p), Op::kNone, Accumulate::kAdd);
    }
    for (Index c = 0; c < nq; ++c) {
      out.col(i0 + c) *= T(1) / w.running_sum[c];
      log_sum_exp[i0 + c] = w.running_max[c] + std::log(w.running_sum[c]);
    }
  }
}

template <typename T>
void backward(StridedView<T> dq, StridedView<T> dk, StridedView<T> dv, ConstStridedView<T> d_out,
              ConstStridedView<T> out, ConstStridedView<T> q, ConstStridedView<T> k, ConstStridedView<T> v,
              const T* log_sum_exp, const AttentionHead& head, const AttentionMask<T>* mask, std::byte* workspace) {
  const Index t = head.t, tile_size = tile_of(head);
  const T scale = attention_scale<T>(head);
  const Workspace<T> w = workspace_of<T>(workspace, head, mask != nullptr);
  for (Index i = 0; i < t; ++i) w.row_dots[i] = d_out.col(i).dot(out.col(i));
  dq.setZero();
  dk.setZero();
  dv.setZero();
  for (Index j0 = 0; j0 < t; j0 += tile_size) {
    const Index nk = std::min(tile_size, t - j0);
    // Causal: the queries before the key block see none of its keys.
    for (Index i0 = head.causal ? j0 : 0; i0 < t; i0 += tile_size) {
      const Index nq = std::min(tile_size, t - i0);
      StridedView<T> p = tile(w.scores, nk, nq), dp = tile(w.d_scores, nk, nq);
      multiply_tile<T>(p, columns(k, j0, nk), Op::kTranspose, columns(q, i0, nq), Op::kNone, Accumulate::kOverwrite);
      for (Index c = 0; c < nq; ++c) {
        T* column = p.col(c).data();
        const Index keys = visible_keys(head, i0 + c, j0, nk);
        Column<T> scores(column, keys);
        scores = (scores * scale - log_sum_exp[i0 + c]).exp();
        std::fill(column + keys, column + nk, T(0));
      }
      const ConstStridedView<T> d_out_block = columns(d_out, i0, nq);
      if (mask) {
        const StridedView<T> m = draw_masks(*mask, w.mask, i0, nq, j0, nk);
        dp = p.cwiseProduct(m);
        multiply_tile<T>(columns(dv, j0, nk), d_out_block, Op::kNone, read_only(dp), Op::kTranspose, Accumulate::kAdd);
        multiply_tile<T>(dp, columns(v, j0, nk), Op::kTranspose, d_out_block, Op::kNone, Accumulate::kOverwrite);
        dp = dp.cwiseProduct(m);
      } else {
        multiply_tile<T>(columns(dv, j0, nk), d_out_block, Op::kNone, read_only(p), Op::kTranspose, Accumulate::kAdd);
        multiply_tile<T>(dp, columns(v, j0, nk), Op::kTranspose, d_out_block, Op::kNone, Accumulate::kOverwrite);
      }
      for (Index c = 0; c < nq; ++c)
        p.col(c) = (p.col(c).array() * (dp.col(c).array() - w.row_dots[i0 + c]) * scale).matrix();
      multiply_tile<T>(columns(dq, i0, nq), columns(k, j0, nk), Op::kNone, read_only(p), Op::kNone, Accumulate::kAdd);
      multiply_tile<T>(columns(dk, j0, nk), columns(q, i0, nq), Op::kNone, read_only(p), Op::kTranspose, Accumulate::kAdd);
    }
  }
}

}  // namespace tiled_attention_parts

template <typename T>
AttentionKernel<T> tiled_attention() {
  using namespace tiled_attention_parts;
  return {&kept_values, &workspace_bytes<T>, &forward<T>, &backward<T>};
}

template AttentionKernel<float> tiled_attention<float>();
template AttentionKernel<double> tiled_attention<double>();

}  // namespace mpiddp::kernels
