// The tiled core of attention, as FlashAttention computes it: no (T, T) matrix in memory.
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
// as the naive form's (AttentionCore::draw_mask): the same probabilities are dropped. The
// sum l counts the probabilities before dropout, as the softmax does; the output reads the
// dropped ones, and D_i = dO_i . O_i still holds, O being the dropped output.
//
// A causal tile whose keys all lie after a query leaves that query alone; the first key
// block holds key 0, which every query sees, so m is finite from the first tile on.
#include <algorithm>
#include <limits>
#include <vector>

#include "mpiddp/nn/attention_core.hpp"
#include "mpiddp/nn/layer.hpp"

namespace mpiddp::nn {
namespace {

// Keys and queries per tile: a (64, 64) tile of scores, its gradient and its mask fit in L1
// and L2 alongside the blocks of q, k and v they come from.
constexpr Index kAttentionTile = 64;

template <typename T>
class TiledAttention final : public AttentionCore<T> {
  using AttentionCore<T>::g_;
  using AttentionCore<T>::scale_;
  using Column = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;

 public:
  explicit TiledAttention(const AttentionGeometry& geometry)
      : AttentionCore<T>(geometry), tile_(std::min(kAttentionTile, geometry.t)) {}

  void forward(Index b, Index h, int worker, const DropoutStream* dropout, Index position) override {
    const Workspace& w = workspaces_[worker];
    const auto q = this->q(b, h), k = this->k(b, h), v = this->v(b, h);
    auto out = this->out(b, h);
    T* lse = log_sum_exp(b, h);
    for (Index i0 = 0; i0 < g_.t; i0 += tile_) {
      const Index nq = std::min(tile_, g_.t - i0);
      const Index key_end = g_.causal ? i0 + nq : g_.t;
      out.middleCols(i0, nq).setZero();
      std::fill(w.running_max, w.running_max + nq, -std::numeric_limits<T>::infinity());
      std::fill(w.running_sum, w.running_sum + nq, T(0));
      for (Index j0 = 0; j0 < key_end; j0 += tile_) {
        const Index nk = std::min(tile_, key_end - j0);
        MatrixView<T> p(w.scores, nk, nq);
        p.noalias() = k.middleCols(j0, nk).transpose() * q.middleCols(i0, nq);
        for (Index c = 0; c < nq; ++c) {
          T* column = p.col(c).data();
          const Index keys = visible_keys(i0 + c, j0, nk);
          if (keys > 0) {
            Column scores(column, keys);
            const T block_max = scores.maxCoeff() * scale_;
            const T new_max = std::max(w.running_max[c], block_max);
            const T rescale = std::exp(w.running_max[c] - new_max);  // 0 on the first tile
            scores = (scores * scale_ - new_max).exp();
            w.running_sum[c] = w.running_sum[c] * rescale + scores.sum();
            if (rescale != T(1)) out.col(i0 + c) *= rescale;
            w.running_max[c] = new_max;
          }
          std::fill(column + keys, column + nk, T(0));
        }
        if (dropout) p = p.cwiseProduct(draw_masks(*dropout, w.mask, h, i0, nq, j0, nk, position));
        out.middleCols(i0, nq).noalias() += v.middleCols(j0, nk) * p;
      }
      for (Index c = 0; c < nq; ++c) {
        out.col(i0 + c) *= T(1) / w.running_sum[c];
        lse[i0 + c] = w.running_max[c] + std::log(w.running_sum[c]);
      }
    }
  }

  void backward(Index b, Index h, int worker, const DropoutStream* dropout, Index position) override {
    const Workspace& w = workspaces_[worker];
    const auto q = this->q(b, h), k = this->k(b, h), v = this->v(b, h);
    auto dq = this->dq(b, h), dk = this->dk(b, h), dv = this->dv(b, h);
    const auto out = this->out(b, h);
    const auto d_out = this->d_out(b, h);
    const T* lse = log_sum_exp(b, h);
    for (Index i = 0; i < g_.t; ++i) w.row_dots[i] = d_out.col(i).dot(out.col(i));
    dq.setZero();
    dk.setZero();
    dv.setZero();
    for (Index j0 = 0; j0 < g_.t; j0 += tile_) {
      const Index nk = std::min(tile_, g_.t - j0);
      // Causal: the queries before the key block see none of its keys.
      for (Index i0 = g_.causal ? j0 : 0; i0 < g_.t; i0 += tile_) {
        const Index nq = std::min(tile_, g_.t - i0);
        MatrixView<T> p(w.scores, nk, nq), dp(w.d_scores, nk, nq);
        p.noalias() = k.middleCols(j0, nk).transpose() * q.middleCols(i0, nq);
        for (Index c = 0; c < nq; ++c) {
          T* column = p.col(c).data();
          const Index keys = visible_keys(i0 + c, j0, nk);
          Column scores(column, keys);
          scores = (scores * scale_ - lse[i0 + c]).exp();
          std::fill(column + keys, column + nk, T(0));
        }
        const auto d_out_block = d_out.middleCols(i0, nq);
        if (dropout) {
          const auto mask = draw_masks(*dropout, w.mask, h, i0, nq, j0, nk, position);
          dp = p.cwiseProduct(mask);
          dv.middleCols(j0, nk).noalias() += d_out_block * dp.transpose();
          dp.noalias() = v.middleCols(j0, nk).transpose() * d_out_block;
          dp = dp.cwiseProduct(mask);
        } else {
          dv.middleCols(j0, nk).noalias() += d_out_block * p.transpose();
          dp.noalias() = v.middleCols(j0, nk).transpose() * d_out_block;
        }
        for (Index c = 0; c < nq; ++c)
          p.col(c) = (p.col(c).array() * (dp.col(c).array() - w.row_dots[i0 + c]) * scale_).matrix();
        dq.middleCols(i0, nq).noalias() += k.middleCols(j0, nk) * p;
        dk.middleCols(j0, nk).noalias() += q.middleCols(i0, nq) * p.transpose();
      }
    }
  }

 private:
  T* log_sum_exp(Index b, Index h) const { return log_sum_exp_ + (b * g_.heads + h) * g_.t; }
  // How many of the keys j0 .. j0 + nk - 1 query i sees: all, or when causal those up to i.
  Index visible_keys(Index i, Index j0, Index nk) const {
    return g_.causal ? std::clamp(i - j0 + 1, Index(0), nk) : nk;
  }
  // The tile's mask (keys by queries) into mask.
  ConstMatrixView<T> draw_masks(const DropoutStream& dropout, T* mask, Index h, Index i0, Index nq, Index j0,
                                Index nk, Index position) const {
    for (Index c = 0; c < nq; ++c) this->draw_mask(dropout, h, i0 + c, j0, nk, position, mask + c * nk);
    return {mask, nk, nq};
  }

  // Kept: each query's log-sum-exp, (T, heads, B). A worker's, within one call: the tile's
  // scores, their gradient and (with dropout) mask, (tile, tile) each; the running maxima and
  // sums of a query block, (tile) each; backward's D_i, (T).
  struct Workspace {
    T* scores = nullptr;       // scores, then probabilities, then their gradient
    T* d_scores = nullptr;
    T* mask = nullptr;         // with dropout
    T* running_max = nullptr;
    T* running_sum = nullptr;
    T* row_dots = nullptr;     // D_i
  };

  size_t kept_bytes(Index max_batch) const override { return scratch_values_bytes<T>(g_.t * g_.heads * max_batch); }
  size_t workspace_bytes() const override {
    return (g_.dropout > 0.0 ? 3 : 2) * scratch_values_bytes<T>(tile_ * tile_) + 2 * scratch_values_bytes<T>(tile_) +
           scratch_values_bytes<T>(g_.t);
  }
  void bind_kept(std::byte* scratch, Index max_batch) override {
    log_sum_exp_ = take_scratch_values<T>(scratch, g_.t * g_.heads * max_batch);
  }
  void bind_workspace(int worker, std::byte* scratch) override {
    if (workspaces_.size() <= static_cast<size_t>(worker)) workspaces_.resize(worker + 1);
    Workspace& w = workspaces_[worker];
    w.scores = take_scratch_values<T>(scratch, tile_ * tile_);
    w.d_scores = take_scratch_values<T>(scratch, tile_ * tile_);
    if (g_.dropout > 0.0) w.mask = take_scratch_values<T>(scratch, tile_ * tile_);
    w.running_max = take_scratch_values<T>(scratch, tile_);
    w.running_sum = take_scratch_values<T>(scratch, tile_);
    w.row_dots = take_scratch_values<T>(scratch, g_.t);
  }

  Index tile_;
  T* log_sum_exp_ = nullptr;  // (T, heads, B)
  std::vector<Workspace> workspaces_;
};

}  // namespace

template <typename T>
std::unique_ptr<AttentionCore<T>> make_tiled_attention(const AttentionGeometry& geometry) {
  return std::make_unique<TiledAttention<T>>(geometry);
}

template std::unique_ptr<AttentionCore<float>> make_tiled_attention<float>(const AttentionGeometry&);
template std::unique_ptr<AttentionCore<double>> make_tiled_attention<double>(const AttentionGeometry&);

}  // namespace mpiddp::nn
