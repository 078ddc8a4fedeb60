#include "mpiddp/nn/layernorm.hpp"

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

// Each row's mean and variance are summed in double, then rounded once to T: a float32 row
// of 768 values keeps its variance's digits whatever their size.
template <typename T>
void LayerNorm<T>::forward(const PassContext&, ConstMatrixView<T> x, MatrixView<T> y) {
  const Index c = width_;
  for (Index r = 0; r < rows_ * x.cols(); ++r) {
    const T* in = x.data() + r * c;
    T* out = y.data() + r * c;
    double sum = 0.0;
    for (Index i = 0; i < c; ++i) sum += static_cast<double>(in[i]);
    const double mean = sum / static_cast<double>(c);
    double squares = 0.0;
    for (Index i = 0; i < c; ++i) {
      const double d = static_cast<double>(in[i]) - mean;
      squares += d * d;
    }
    const double rstd = 1.0 / std::sqrt(squares / static_cast<double>(c) + eps_);
    mean_[r] = static_cast<T>(mean);
    rstd_[r] = static_cast<T>(rstd);
    for (Index i = 0; i < c; ++i) {
      const T normalised = (in[i] - mean_[r]) * rstd_[r];
      out[i] = affine_ ? normalised * weight_[i] + weight_[c + i] : normalised;
    }
  }
}

// With n = (x - mean) rstd and g = dy * weight (dy without affine):
// dx = rstd (g - mean(g) - n mean(g n)); d weight += dy n, d bias += dy, row after row.
template <typename T>
void LayerNorm<T>::backward(const PassContext&, ConstMatrixView<T> x, ConstMatrixView<T>, ConstMatrixView<T> dy,
                            MatrixView<T>* dx) {
  const Index c = width_;
  for (Index r = 0; r < rows_ * x.cols(); ++r) {
    const T* in = x.data() + r * c;
    const T* d = dy.data() + r * c;
    const T mean = mean_[r], rstd = rstd_[r];
    double g_sum = 0.0, gn_sum = 0.0;
    for (Index i = 0; i < c; ++i) {
      const T normalised = (in[i] - mean) * rstd;
      const T g = affine_ ? d[i] * weight_[i] : d[i];
      g_sum += static_cast<double>(g);
      gn_sum += static_cast<double>(g) * static_cast<double>(normalised);
      if (affine_) {
        grad_[i] += d[i] * normalised;
        grad_[c + i] += d[i];
      }
    }
    if (!dx) continue;
    const T g_mean = static_cast<T>(g_sum / static_cast<double>(c));
    const T gn_mean = static_cast<T>(gn_sum / static_cast<double>(c));
    T* out = dx->data() + r * c;
    for (Index i = 0; i < c; ++i) {
      const T normalised = (in[i] - mean) * rstd;
      const T g = affine_ ? d[i] * weight_[i] : d[i];
      out[i] = rstd * (g - g_mean - normalised * gn_mean);
    }
  }
}

template class LayerNorm<float>;
template class LayerNorm<double>;

}  // namespace mpiddp::nn
