#include "mpiddp/nn/layernorm.hpp"

#include <algorithm>
#include <cmath>

#include "mpiddp/core/error.hpp"

namespace mpiddp::nn {

LayerNormOptions LayerNormOptions::parse(io::JsonSection& section) {
  LayerNormOptions options;
  options.eps = section.number("eps", 1e-5, 1e-30, 1.0);
  options.affine = section.boolean("affine", true);
  // Taken, as by every layer with weights, but a norm's scale and shift start at ones and
  // zeros with it too (nanoGPT's _init_weights leaves LayerNorm so).
  InitStd::parse(section);
  return options;
}

template <typename T>
LayerNorm<T>::LayerNorm(const LayerNormOptions& options, const Shape& input, const std::string&)
    : Layer<T>(input, input),
      width_(input.back()),
      rows_(shape_size(input) / input.back()),
      eps_(options.eps),
      affine_(options.affine) {}

template <typename T>
std::vector<TensorSpec> LayerNorm<T>::parameters() const {
  if (!affine_) return {};
  return {{"weight", {width_}}, {"bias", {width_}}};
}

template <typename T>
size_t LayerNorm<T>::scratch_bytes(Index max_batch) const {
  return 2 * scratch_values_bytes<T>(rows_ * max_batch);
}

template <typename T>
void LayerNorm<T>::bind(const LayerMemory<T>& memory) {
  weight_ = memory.parameters;
  grad_ = memory.gradients;
  std::byte* scratch = memory.scratch;
  mean_ = take_scratch_values<T>(scratch, rows_ * memory.max_batch);
  rstd_ = take_scratch_values<T>(scratch, rows_ * memory.max_batch);
}

template <typename T>
void LayerNorm<T>::initialize(Rng&) {
  if (!affine_) return;
  for (Index c = 0; c < width_; ++c) {
    weight_[c] = T(1);
    weight_[width_ + c] = T(0);
  }
}

namespace {

// Note [rows side by side]
// A row's mean and variance are sums in double, each a chain of additions in a fixed order
// (i ascending), and a chain runs at one addition per adder latency (4 cycles) whatever the
// vector width. Rows are independent, so kSideBySide rows' chains run interleaved, each chain
// exactly as it was alone: the same operations in the same order, the same bits, in a fraction
// of the time (LayerNorm's forward was a tenth of a bf16 gpt step when it went row by row).
constexpr Index kSideBySide = 8;

// The double sums of `rows` rows of c values from in, row l at in + l c: their means and
// their sums of squared deviations.
template <typename T, Index rows>
void row_moments(const T* in, Index c, double* mean, double* squares) {
  double sum[rows] = {};
  for (Index i = 0; i < c; ++i)
    for (Index l = 0; l < rows; ++l) sum[l] += static_cast<double>(in[l * c + i]);
  for (Index l = 0; l < rows; ++l) {
    mean[l] = sum[l] / static_cast<double>(c);
    squares[l] = 0.0;
  }
  for (Index i = 0; i < c; ++i)
    for (Index l = 0; l < rows; ++l) {
      const double d = static_cast<double>(in[l * c + i]) - mean[l];
      squares[l] += d * d;
    }
}

// Backward's double sums of `rows` rows (Note [rows side by side]), with g = dy weight (dy
// without affine) and n the normalised input: sum g and sum g n per row. With affine, d weight
// += dy n and d bias += dy, each weight's terms added in row order, as row by row.
template <typename T, Index rows>
void row_gradient_sums(const T* in, const T* dy, Index c, const T* mean, const T* rstd, const T* weight, T* grad,
                       double* g_sum, double* gn_sum) {
  for (Index l = 0; l < rows; ++l) g_sum[l] = gn_sum[l] = 0.0;
  for (Index i = 0; i < c; ++i)
    for (Index l = 0; l < rows; ++l) {
      const T d = dy[l * c + i];
      const T normalised = (in[l * c + i] - mean[l]) * rstd[l];
      const T g = weight ? d * weight[i] : d;
      g_sum[l] += static_cast<double>(g);
      gn_sum[l] += static_cast<double>(g) * static_cast<double>(normalised);
      if (grad) {
        grad[i] += d * normalised;
        grad[c + i] += d;
      }
    }
}

}  // namespace

// Each row's mean and variance are summed in double, then rounded once to T: a float32 row
// of 768 values keeps its variance's digits whatever their size.
template <typename T>
void LayerNorm<T>::forward(const PassContext&, ConstMatrixView<T> x, MatrixView<T> y) {
  const Index c = width_, rows = rows_ * x.cols();
  for (Index first = 0; first < rows; first += kSideBySide) {
    const Index together = std::min(kSideBySide, rows - first);
    double mean[kSideBySide], squares[kSideBySide];
    if (together == kSideBySide)
      row_moments<T, kSideBySide>(x.data() + first * c, c, mean, squares);
    else
      for (Index l = 0; l < together; ++l) row_moments<T, 1>(x.data() + (first + l) * c, c, mean + l, squares + l);
    for (Index l = 0; l < together; ++l) {
      const Index r = first + l;
      const T* in = x.data() + r * c;
      T* out = y.data() + r * c;
      const double rstd = 1.0 / std::sqrt(squares[l] / static_cast<double>(c) + eps_);
      mean_[r] = static_cast<T>(mean[l]);
      rstd_[r] = static_cast<T>(rstd);
      for (Index i = 0; i < c; ++i) {
        const T normalised = (in[i] - mean_[r]) * rstd_[r];
        out[i] = affine_ ? normalised * weight_[i] + weight_[c + i] : normalised;
      }
    }
  }
}

// With n = (x - mean) rstd and g = dy * weight (dy without affine):
// dx = rstd (g - mean(g) - n mean(g n)); d weight += dy n, d bias += dy, row after row.
template <typename T>
void LayerNorm<T>::backward(const PassContext&, ConstMatrixView<T> x, ConstMatrixView<T>, ConstMatrixView<T> dy,
                            MatrixView<T>* dx) {
  const Index c = width_, rows = rows_ * x.cols();
  const T* weight = affine_ ? weight_ : nullptr;
  T* grad = affine_ ? grad_ : nullptr;
  for (Index first = 0; first < rows; first += kSideBySide) {
    const Index together = std::min(kSideBySide, rows - first);
    double g_sum[kSideBySide], gn_sum[kSideBySide];
    const T* in = x.data() + first * c;
    const T* d = dy.data() + first * c;
    if (together == kSideBySide)
      row_gradient_sums<T, kSideBySide>(in, d, c, mean_ + first, rstd_ + first, weight, grad, g_sum, gn_sum);
    else
      for (Index l = 0; l < together; ++l)
        row_gradient_sums<T, 1>(in + l * c, d + l * c, c, mean_ + first + l, rstd_ + first + l, weight, grad,
                                g_sum + l, gn_sum + l);
    if (!dx) continue;
    for (Index l = 0; l < together; ++l) {
      const Index r = first + l;
      const T mean = mean_[r], rstd = rstd_[r];
      const T g_mean = static_cast<T>(g_sum[l] / static_cast<double>(c));
      const T gn_mean = static_cast<T>(gn_sum[l] / static_cast<double>(c));
      const T* row_in = x.data() + r * c;
      const T* row_d = dy.data() + r * c;
      T* out = dx->data() + r * c;
      for (Index i = 0; i < c; ++i) {
        const T normalised = (row_in[i] - mean) * rstd;
        const T g = affine_ ? row_d[i] * weight_[i] : row_d[i];
        out[i] = rstd * (g - g_mean - normalised * gn_mean);
      }
    }
  }
}

template class LayerNorm<float>;
template class LayerNorm<double>;

}  // namespace mpiddp::nn
