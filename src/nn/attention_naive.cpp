// The naive core of attention: each head's (T, T) probabilities of every sample, kept from
// forward to backward. Scratch: those probabilities, (T, T, heads, B), and for each worker
// one head's scores' gradients (T, T) (with dropout also its mask, (T, T): backward draws it
// again rather than keep every head's).
#include <algorithm>
#include <limits>
#include <vector>

#include "mpiddp/nn/attention_core.hpp"
#include "mpiddp/nn/layer.hpp"

namespace mpiddp::nn {
namespace {

template <typename T>
class NaiveAttention final : public AttentionCore<T> {
  using AttentionCore<T>::g_;
  using AttentionCore<T>::scale_;

 public:
  using AttentionCore<T>::AttentionCore;

  // Column i of p is the query at position i: p(j, i) = softmax over j of q_i . k_j / sqrt(D),
  // with the keys after i masked when causal.
  void forward(Index b, Index h, int worker, const DropoutStream* dropout, Index position) override {
    const Index t = g_.t;
    const Workspace& w = workspaces_[worker];
    MatrixView<T> p(probabilities(b, h), t, t);
    p.noalias() = this->k(b, h).transpose() * this->q(b, h);
    for (Index i = 0; i < t; ++i) {
      T* column = p.col(i).data();
      const Index keys = g_.causal ? i + 1 : t;
      T max = -std::numeric_limits<T>::infinity();
      for (Index j = 0; j < keys; ++j) max = std::max(max, column[j] * scale_);
      T sum = 0;
      for (Index j = 0; j < keys; ++j) {
        column[j] = std::exp(column[j] * scale_ - max);
        sum += column[j];
      }
      const T inv = T(1) / sum;
      for (Index j = 0; j < keys; ++j) column[j] *= inv;
      std::fill(column + keys, column + t, T(0));
    }
    auto out = this->out(b, h);
    if (!dropout) {
      out.noalias() = this->v(b, h) * p;
      return;
    }
    // The probabilities stay as they are, for backward's softmax; the dropped ones go into
    // d_scores_, free until backward.
    this->draw_mask(*dropout, h, 0, 0, t * t, position, w.mask);
    MatrixView<T> dropped(w.d_scores, t, t);
    dropped = p.cwiseProduct(ConstMatrixView<T>(w.mask, t, t));
    out.noalias() = this->v(b, h) * dropped;
  }

  // With P the probabilities and dO the head's output gradient: dv = dO P^T, dP = v^T dO, the
  // softmax's dS(j, i) = P(j, i) (dP(j, i) - sum_j' P(j', i) dP(j', i)) / sqrt(D), then
  // dq = k dS and dk = q dS^T. Masked entries have P = 0, so they pass no gradient. With
  // dropout's mask M the output read P M (elementwise): dv = dO (P M)^T, and dP is v^T dO times M.
  void backward(Index b, Index h, int worker, const DropoutStream* dropout, Index position) override {
    const Index t = g_.t;
    const Workspace& w = workspaces_[worker];
    const auto v = this->v(b, h);
    auto dv = this->dv(b, h);
    const auto d_out = this->d_out(b, h);
    const ConstMatrixView<T> p(probabilities(b, h), t, t);
    MatrixView<T> ds(w.d_scores, t, t);
    if (dropout) {
      this->draw_mask(*dropout, h, 0, 0, t * t, position, w.mask);
      const ConstMatrixView<T> mask(w.mask, t, t);
      ds = p.cwiseProduct(mask);
      dv.noalias() = d_out * ds.transpose();
      ds.noalias() = v.transpose() * d_out;
      ds = ds.cwiseProduct(mask);
    } else {
      dv.noalias() = d_out * p.transpose();
      ds.noalias() = v.transpose() * d_out;
    }
    for (Index i = 0; i < t; ++i) {
      const T dot = p.col(i).dot(ds.col(i));
      ds.col(i) = (p.col(i).array() * (ds.col(i).array() - dot) * scale_).matrix();
    }
    this->dq(b, h).noalias() = this->k(b, h) * ds;
    this->dk(b, h).noalias() = this->q(b, h) * ds.transpose();
  }

 private:
  // Kept: every head's probabilities. A worker's: the scores' gradients of one head (and
  // with dropout its mask), each (T, T).
  struct Workspace {
    T* d_scores = nullptr;
    T* mask = nullptr;
  };

  size_t kept_bytes(Index max_batch) const override { return scratch_values_bytes<T>(g_.t * g_.t * g_.heads * max_batch); }
  size_t workspace_bytes() const override { return (g_.dropout > 0.0 ? 2 : 1) * scratch_values_bytes<T>(g_.t * g_.t); }
  void bind_kept(std::byte* scratch, Index max_batch) override {
    probabilities_ = take_scratch_values<T>(scratch, g_.t * g_.t * g_.heads * max_batch);
  }
  void bind_workspace(int worker, std::byte* scratch) override {
    if (workspaces_.size() <= static_cast<size_t>(worker)) workspaces_.resize(worker + 1);
    Workspace& w = workspaces_[worker];
    w.d_scores = take_scratch_values<T>(scratch, g_.t * g_.t);
    if (g_.dropout > 0.0) w.mask = take_scratch_values<T>(scratch, g_.t * g_.t);
  }

  T* probabilities(Index b, Index h) const { return probabilities_ + (b * g_.heads + h) * g_.t * g_.t; }

  T* probabilities_ = nullptr;  // (T, T, heads, B)
  std::vector<Workspace> workspaces_;
};

}  // namespace

template <typename T>
std::unique_ptr<AttentionCore<T>> make_naive_attention(const AttentionGeometry& geometry) {
  return std::make_unique<NaiveAttention<T>>(geometry);
}

template std::unique_ptr<AttentionCore<float>> make_naive_attention<float>(const AttentionGeometry&);
template std::unique_ptr<AttentionCore<double>> make_naive_attention<double>(const AttentionGeometry&);

}  // namespace mpiddp::nn
