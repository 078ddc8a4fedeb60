#include "mpiddp/nn/batchnorm.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "mpiddp/core/error.hpp"

namespace mpiddp::nn {

// Note [batch statistics over the ranks]
// PyTorch normalises with the statistics of the batch it is given; across R ranks the batch
// is the step's global batch, so each channel's N values are spread over the ranks. Every
// rank computes, per channel, in double:
//   n = its count,  S1 = sum(x - K),  S2 = sum((x - K)^2)
// with a shift K that every rank knows without talking: the running_mean before this step's
// update (identical on every rank, since the buffers are). One statistics->sum of the (3, C)
// vector [n, S1, S2 per channel] then gives the global sums, and
//   mean = K + S1/N,  var = S2/N - (S1/N)^2  (biased, as PyTorch normalises).
// The shift is what makes the one-pass formula safe: without it, E[x^2] - E[x]^2 cancels
// catastrophically for data with a large offset (values 1e4 + noise: both terms are 1e8
// and their difference 1e-2). Once running_mean tracks the data, x - K is of the size of
// the noise and S2 carries all its digits.
//
// Backward needs two more global sums per channel, A = sum(g) and Bsum = sum(g xhat)
// (g = dy, xhat = the normalised x), for
//   dx = weight * invstd * (g - A/N - xhat * Bsum/N),
// the derivative of a normalisation whose mean and variance depend on every value of the
// global batch. Each rank's dy is the gradient of its own mean loss, which is R times the
// global mean loss's gradient with respect to the same values, for every rank alike (the
// ranks' shares of the batch are equal). Everything here is linear in dy, so A, Bsum and dx
// all carry the same factor R, and so do the parameter gradients this rank adds up (the
// local sums of g xhat and g): the gradient reducer's division by the world size removes it
// once, for these and for every layer below, as for a model without BatchNorm
// (Note [why divide by the world size here] in distributed/gradient_reducer.cpp).

BatchNormOptions BatchNormOptions::parse(io::JsonSection& section, int dimensions) {
  BatchNormOptions options;
  options.dimensions = dimensions;
  options.momentum = section.number("momentum", options.momentum, 0.0, 1.0);
  // eps > 0: number() checks the type and finiteness; a bound of 0 would admit eps = 0.
  const std::string eps_key = section.key_path("eps");
  const io::Json* eps = section.raw("eps");
  if (eps) {
    if (!eps->is_number() || !std::isfinite(eps->get<double>()) || !(eps->get<double>() > 0.0))
      throw ConfigError(eps_key, "expected a number > 0 (PyTorch's default is 1e-05), got " +
                                     eps->dump(-1, ' ', false, io::Json::error_handler_t::replace));
    options.eps = eps->get<double>();
  }
  section.put("eps", options.eps);
  options.affine = section.boolean("affine", options.affine);
  return options;
}

namespace {

// Note [a plane's sums in fixed lanes]
// Every sum over a channel's values of one sample (its plane, S values) is two sums in
// double, which one accumulator per sum would add one value at a time: a chain of
// dependent additions that runs at the adder's latency, not its width. Instead value s
// goes to lane s mod 8 of 8 partial sums, the lanes are added in order 0..7, and the values
// past the last whole group of 8 are added after them. The order is fixed by S alone, not
// by the CPU's vector width or the batch or the ranks, so the bits are the same on every
// machine and at every world size; the compiler keeps the 8 lanes in vector registers.
constexpr Index kSumLanes = 8;

// (sum of first, sum of second) over s in [0, n) of terms(s) = {first, second}.
template <typename Terms>
std::pair<double, double> plane_sums(Index n, Terms terms) {
  double first[kSumLanes] = {}, second[kSumLanes] = {};
  Index s = 0;
  for (; s + kSumLanes <= n; s += kSumLanes)
    for (Index lane = 0; lane < kSumLanes; ++lane) {
      const auto [a, b] = terms(s + lane);
      first[lane] += a;
      second[lane] += b;
    }
  double a_sum = 0.0, b_sum = 0.0;
  for (Index lane = 0; lane < kSumLanes; ++lane) {
    a_sum += first[lane];
    b_sum += second[lane];
  }
  for (; s < n; ++s) {
    const auto [a, b] = terms(s);
    a_sum += a;
    b_sum += b;
  }
  return {a_sum, b_sum};
}

Shape batchnorm_input(const BatchNormOptions& options, const Shape& input, const std::string& key) {
  const bool fits =
      options.dimensions == 1 ? input.size() == 1 || input.size() == 2 : input.size() == 3;
  if (!fits)
    throw ConfigError(key, options.dimensions == 1
                               ? "batchnorm1d needs an input of (F) or (C, L) but gets " +
                                     shape_text(input) + "; use batchnorm2d for (C, H, W)"
                               : "batchnorm2d needs an input of (C, H, W) but gets " +
                                     shape_text(input) + "; use batchnorm1d for (F) or (C, L)");
  return input;
}

}  // namespace

template <typename T>
BatchNorm<T>::BatchNorm(const BatchNormOptions& options, const Shape& input, const std::string& key)
    : Layer<T>(batchnorm_input(options, input, key), input), options_(options), key_(key) {
  channels_ = input[0];
  spatial_ = shape_size(input) / channels_;
}

template <typename T>
std::vector<TensorSpec> BatchNorm<T>::parameters() const {
  if (!options_.affine) return {};
  return {{"weight", {channels_}}, {"bias", {channels_}}};
}

template <typename T>
std::vector<BufferSpec> BatchNorm<T>::buffers() const {
  return {{"running_mean", {channels_}, BufferType::kReal},
          {"running_var", {channels_}, BufferType::kReal},
          {"num_batches_tracked", {}, BufferType::kInt64}};
}

template <typename T>
size_t BatchNorm<T>::scratch_bytes(Index) const {
  // mean (C), invstd (C), count (1), sums (3C)
  return static_cast<size_t>(5 * channels_ + 1) * sizeof(double);
}

template <typename T>
void BatchNorm<T>::bind(const LayerMemory<T>& memory) {
  if (options_.affine) {
    weight_ = memory.parameters;
    bias_ = memory.parameters + channels_;
    weight_grad_ = memory.gradients;
    bias_grad_ = memory.gradients + channels_;
  }
  running_mean_ = memory.buffers;
  running_var_ = memory.buffers + channels_;
  batches_tracked_ = memory.counters;
  auto* scratch = reinterpret_cast<double*>(memory.scratch);
  mean_ = scratch;
  invstd_ = scratch + channels_;
  count_ = scratch + 2 * channels_;
  sums_ = scratch + 2 * channels_ + 1;
}

template <typename T>
void BatchNorm<T>::initialize(Rng&) {
  if (options_.affine) {
    std::fill_n(weight_, channels_, T(1));
    std::fill_n(bias_, channels_, T(0));
  }
  std::fill_n(running_mean_, channels_, T(0));
  std::fill_n(running_var_, channels_, T(1));
  *batches_tracked_ = 0;
}

template <typename T>
void BatchNorm<T>::batch_statistics(const PassContext& context, ConstMatrixView<T> x) {
  // Note [batch statistics over the ranks]. sums_: (3, C), [n, S1, S2] for each channel.
  const Index batch = x.cols();
  for (Index c = 0; c < channels_; ++c) {
    sums_[3 * c] = static_cast<double>(batch * spatial_);
    sums_[3 * c + 1] = 0.0;
    sums_[3 * c + 2] = 0.0;
  }
  for (Index b = 0; b < batch; ++b)
    for (Index c = 0; c < channels_; ++c) {
      const T* values = x.col(b).data() + c * spatial_;  // (S) channel c of sample b
      const double shift = static_cast<double>(running_mean_[c]);
      const auto [s1, s2] = plane_sums(spatial_, [&](Index s) {  // Note [a plane's sums in fixed lanes]
        const double d = static_cast<double>(values[s]) - shift;
        return std::pair<double, double>{d, d * d};
      });
      sums_[3 * c + 1] += s1;
      sums_[3 * c + 2] += s2;
    }
  if (context.statistics) context.statistics->sum(sums_, static_cast<size_t>(3 * channels_));

  const double n = sums_[0];
  if (n <= 1.0)
    throw Error(kExitConfig,
                key_ + ": " + type() + " over " + std::to_string(static_cast<long long>(n)) +
                    " value per channel in training (input " + shape_text(this->input_shape()) +
                    ", " + std::to_string(batch) + " sample(s) on this rank" +
                    (context.statistics ? ", summed over the ranks" : "") +
                    "): the batch variance needs at least 2 values; use a larger batch",
                Scope::kEveryRank);
  *count_ = n;
  const double m = options_.momentum;
  for (Index c = 0; c < channels_; ++c) {
    const double shift = static_cast<double>(running_mean_[c]);
    const double m1 = sums_[3 * c + 1] / n;
    const double mean = shift + m1;
    const double var = std::max(0.0, sums_[3 * c + 2] / n - m1 * m1);  // rounding can dip below 0
    mean_[c] = mean;
    invstd_[c] = 1.0 / std::sqrt(var + options_.eps);
    // PyTorch's update: the running variance is the unbiased estimate, var * N/(N-1).
    running_mean_[c] = static_cast<T>((1.0 - m) * shift + m * mean);
    running_var_[c] =
        static_cast<T>((1.0 - m) * static_cast<double>(running_var_[c]) + m * var * n / (n - 1.0));
  }
  *batches_tracked_ += 1;
}

template <typename T>
void BatchNorm<T>::forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) {
  if (context.training) {
    batch_statistics(context, x);
  } else {
    for (Index c = 0; c < channels_; ++c) {
      mean_[c] = static_cast<double>(running_mean_[c]);
      invstd_[c] = 1.0 / std::sqrt(static_cast<double>(running_var_[c]) + options_.eps);
    }
  }
  // y = (x - mean) * (invstd * weight) + bias, in double: x - mean first, so a large offset
  // cancels exactly before anything is rounded to T.
  for (Index b = 0; b < x.cols(); ++b)
    for (Index c = 0; c < channels_; ++c) {
      const T* in = x.col(b).data() + c * spatial_;  // (S)
      T* out = y.col(b).data() + c * spatial_;       // (S)
      const double mean = mean_[c];
      const double scale = invstd_[c] * (weight_ ? static_cast<double>(weight_[c]) : 1.0);
      const double shift = bias_ ? static_cast<double>(bias_[c]) : 0.0;
      for (Index s = 0; s < spatial_; ++s)
        out[s] = static_cast<T>((static_cast<double>(in[s]) - mean) * scale + shift);
    }
}

template <typename T>
void BatchNorm<T>::backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T>,
                            ConstMatrixView<T> dy, MatrixView<T>* dx) {
  if (!options_.affine && !dx) return;
  // sums_: (2, C), [A = sum(g), Bsum = sum(g xhat)] for each channel, this rank's values.
  const Index batch = x.cols();
  std::fill_n(sums_, 2 * channels_, 0.0);
  for (Index b = 0; b < batch; ++b)
    for (Index c = 0; c < channels_; ++c) {
      const T* in = x.col(b).data() + c * spatial_;  // (S)
      const T* g = dy.col(b).data() + c * spatial_;  // (S)
      const double mean = mean_[c], invstd = invstd_[c];
      const auto [a, bsum] = plane_sums(spatial_, [&](Index s) {
        const double gs = static_cast<double>(g[s]);
        return std::pair<double, double>{gs, gs * (static_cast<double>(in[s]) - mean) * invstd};
      });
      sums_[2 * c] += a;
      sums_[2 * c + 1] += bsum;
    }
  // dweight = sum(g xhat), dbias = sum(g) over this rank's values: the reducer averages them
  // over the ranks (Note [batch statistics over the ranks]).
  if (options_.affine)
    for (Index c = 0; c < channels_; ++c) {
      weight_grad_[c] += static_cast<T>(sums_[2 * c + 1]);
      bias_grad_[c] += static_cast<T>(sums_[2 * c]);
    }
  if (!dx) return;

  if (!context.training) {
    // The running statistics are constants: y is affine in x.
    for (Index b = 0; b < batch; ++b)
      for (Index c = 0; c < channels_; ++c) {
        const T* g = dy.col(b).data() + c * spatial_;  // (S)
        T* out = dx->col(b).data() + c * spatial_;     // (S)
        const double scale = invstd_[c] * (weight_ ? static_cast<double>(weight_[c]) : 1.0);
        for (Index s = 0; s < spatial_; ++s)
          out[s] = static_cast<T>(static_cast<double>(g[s]) * scale);
      }
    return;
  }

  if (context.statistics) context.statistics->sum(sums_, static_cast<size_t>(2 * channels_));
  const double n = *count_;
  for (Index b = 0; b < batch; ++b)
    for (Index c = 0; c < channels_; ++c) {
      const T* in = x.col(b).data() + c * spatial_;  // (S)
      const T* g = dy.col(b).data() + c * spatial_;  // (S)
      T* out = dx->col(b).data() + c * spatial_;     // (S)
      const double mean = mean_[c], invstd = invstd_[c];
      const double scale = invstd * (weight_ ? static_cast<double>(weight_[c]) : 1.0);
      const double a = sums_[2 * c] / n, bsum = sums_[2 * c + 1] / n;
      // dx = weight * invstd * (g - A/N - xhat * Bsum/N)
      for (Index s = 0; s < spatial_; ++s) {
        const double xhat = (static_cast<double>(in[s]) - mean) * invstd;
        out[s] = static_cast<T>(scale * (static_cast<double>(g[s]) - a - xhat * bsum));
      }
    }
}

template <typename T>
void BatchNorm<T>::check_training_batch(Index smallest) const {
  if (smallest * spatial_ <= 1)
    throw ConfigError(key_, type() + " would normalise over " + std::to_string(smallest * spatial_) +
                                " value per channel in training (input " +
                                shape_text(this->input_shape()) + ", the smallest batch it sees " +
                                "has " + std::to_string(smallest) +
                                " sample): the batch variance needs at least 2 values; use a "
                                "larger batch, drop_last, or fewer accumulate_steps");
}

template class BatchNorm<float>;
template class BatchNorm<double>;

}  // namespace mpiddp::nn
