#include "mpiddp/nn/conv2d.hpp"

#include <algorithm>
#include <cmath>

#include "mpiddp/core/error.hpp"
#include "mpiddp/kernels/gemm.hpp"

namespace mpiddp::nn {

Conv2dOptions Conv2dOptions::parse(io::JsonSection& section) {
  Conv2dOptions options;
  if (!section.has("out")) throw ConfigError(section.key_path("out"), "required key is missing");
  options.out = section.integer("out", 0, 1, 1 << 24);
  options.window = parse_window(section, Pair2d{1, 1});
  options.bias = section.boolean("bias", true);
  options.init = InitStd::parse(section);
  return options;
}

namespace {

template <typename T>
using ConstRowView = Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>;

// (O, Ho, Wo), after the checks that name the layer's keys.
Shape conv2d_output(const Conv2dOptions& options, const Shape& input, const std::string& key) {
  const Pair2d size = window_output(options.window, image_input(input, key, "conv2d"), input, key);
  return {options.out, size.h, size.w};
}

}  // namespace

template <typename T>
Conv2d<T>::Conv2d(const Conv2dOptions& options, const Shape& input, const std::string& key)
    : Layer<T>(input, conv2d_output(options, input, key)),
      options_(options),
      image_{input[0], input[1], input[2]},
      out_size_{this->output_shape()[1], this->output_shape()[2]} {
  const Window2d& w = options_.window;
  for (Index i = 0; i < w.kernel.h; ++i)
    row_taps_.push_back(inside_taps(out_size_.h, w.stride.h, w.padding.h, i, image_.height));
  for (Index j = 0; j < w.kernel.w; ++j)
    column_taps_.push_back(inside_taps(out_size_.w, w.stride.w, w.padding.w, j, image_.width));
  rows_run_on_ = w.stride == Pair2d{1, 1} && out_size_.w == image_.width;
}

template <typename T>
std::string Conv2d<T>::describe() const {
  const Window2d& w = options_.window;
  return "conv2d" + std::to_string(options_.out) + "k" + pair_tag(w.kernel) + "s" +
         pair_tag(w.stride) + "p" + pair_tag(w.padding) + (options_.bias ? "" : "nb");
}

template <typename T>
std::vector<TensorSpec> Conv2d<T>::parameters() const {
  const Window2d& w = options_.window;
  std::vector<TensorSpec> specs = {
      {"weight", {options_.out, image_.channels, w.kernel.h, w.kernel.w}}};
  if (options_.bias) specs.push_back({"bias", {options_.out}});
  return specs;
}

template <typename T>
bool Conv2d<T>::input_is_cols() const {
  const Window2d& w = options_.window;
  return w.kernel == Pair2d{1, 1} && w.stride == Pair2d{1, 1} && w.padding == Pair2d{0, 0};
}

template <typename T>
size_t Conv2d<T>::scratch_bytes(Index) const {
  if (input_is_cols()) return 0;
  return static_cast<size_t>(positions() * taps()) * sizeof(T);
}

template <typename T>
void Conv2d<T>::bind(const LayerMemory<T>& memory) {
  const Index weights = options_.out * taps();
  weight_ = memory.parameters;
  weight_grad_ = memory.gradients;
  bias_ = options_.bias ? memory.parameters + weights : nullptr;
  bias_grad_ = options_.bias ? memory.gradients + weights : nullptr;
  cols_ = input_is_cols() ? nullptr : reinterpret_cast<T*>(memory.scratch);
}

template <typename T>
void Conv2d<T>::initialize(Rng& rng) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(taps()));
  initialize_weights(weight_, options_.out * taps(), options_.init, bound, rng);
  if (bias_) initialize_bias(bias_, options_.out, options_.init, bound, rng);
}

// Note [rows that run on]
// With stride 1 and an output as wide as its input (a "same" convolution, 2 pw = kw - 1),
// output row oh + 1 of a tap starts W values after output row oh, and so does the input row
// it reads: the tap's whole column is one contiguous run of the input, shifted by the tap's
// offset. Only the |shift| values at the ends of each row are wrong: they fall on the
// padding, and the run reads the neighbouring row's values there. im2col copies the run and
// zeroes them after; col2im zeroes their gradients first (they belong to the padding) and
// adds the run. This is the common case (3x3, padding 1): one loop over the plane per tap
// instead of one short loop per output row.

template <typename T>
void Conv2d<T>::im2col(const T* x, T* cols) const {
  const Window2d& w = options_.window;
  const Index height = image_.height, width = image_.width;
  const Index out_w = out_size_.w, p = positions();
  T* col = cols;  // (P) for tap (c, i, j), columns in the weight's [C, kh, kw] order
  for (Index c = 0; c < image_.channels; ++c) {
    const T* plane = x + c * height * width;  // (H, W)
    for (Index i = 0; i < w.kernel.h; ++i) {
      const TapRange rows = row_taps_[static_cast<size_t>(i)];
      for (Index j = 0; j < w.kernel.w; ++j, col += p) {
        const TapRange inside = column_taps_[static_cast<size_t>(j)];
        const Index shift = j - w.padding.w;  // output ow reads input column ow * sw + shift
        // Output rows whose tap row is on the padding; most taps have none (a call each
        // would cost as much as the copy, see zero_row_ends).
        if (rows.begin > 0) std::fill(col, col + rows.begin * out_w, T(0));
        if (rows.end * out_w < p) std::fill(col + rows.end * out_w, col + p, T(0));
        if (rows_run_on_) {
          const Run run = tap_run(rows, i, shift);
          for (Index k = run.begin; k < run.end; ++k) col[k] = plane[k + run.offset];
          zero_row_ends(col, rows, inside);
          continue;
        }
        for (Index oh = rows.begin; oh < rows.end; ++oh) {
          const T* row = plane + (oh * w.stride.h - w.padding.h + i) * width;  // (W)
          T* out = col + oh * out_w;                                           // (Wo)
          for (Index ow = 0; ow < inside.begin; ++ow) out[ow] = T(0);
          for (Index ow = inside.begin; ow < inside.end; ++ow)
            out[ow] = row[ow * w.stride.w + shift];
          for (Index ow = inside.end; ow < out_w; ++ow) out[ow] = T(0);
        }
      }
    }
  }
}

template <typename T>
void Conv2d<T>::col2im(T* dcols, T* dx) const {
  const Window2d& w = options_.window;
  const Index height = image_.height, width = image_.width;
  const Index out_w = out_size_.w, p = positions();
  std::fill(dx, dx + this->inputs(), T(0));
  T* col = dcols;
  for (Index c = 0; c < image_.channels; ++c) {
    T* plane = dx + c * height * width;  // (H, W)
    for (Index i = 0; i < w.kernel.h; ++i) {
      const TapRange rows = row_taps_[static_cast<size_t>(i)];
      for (Index j = 0; j < w.kernel.w; ++j, col += p) {
        const TapRange inside = column_taps_[static_cast<size_t>(j)];
        const Index shift = j - w.padding.w;
        if (rows_run_on_) {
          zero_row_ends(col, rows, inside);
          const Run run = tap_run(rows, i, shift);
          for (Index k = run.begin; k < run.end; ++k) plane[k + run.offset] += col[k];
          continue;
        }
        for (Index oh = rows.begin; oh < rows.end; ++oh) {
          T* row = plane + (oh * w.stride.h - w.padding.h + i) * width;  // (W)
          const T* in = col + oh * out_w;                                // (Wo)
          for (Index ow = inside.begin; ow < inside.end; ++ow)
            row[ow * w.stride.w + shift] += in[ow];
        }
      }
    }
  }
}

template <typename T>
void Conv2d<T>::zero_row_ends(T* col, TapRange rows, TapRange inside) const {
  // Column by column down the rows: the ends are 0 or 1 values wide (padding 1), and a loop
  // along a row would become a call to memset per row, which cost more than the copy itself
  // (8 % of the cnn's step, measured with perf).
  const Index out_w = out_size_.w;
  for (Index ow = 0; ow < inside.begin; ++ow)
    for (Index oh = rows.begin; oh < rows.end; ++oh) col[oh * out_w + ow] = T(0);
  for (Index ow = inside.end; ow < out_w; ++ow)
    for (Index oh = rows.begin; oh < rows.end; ++oh) col[oh * out_w + ow] = T(0);
}

template <typename T>
typename Conv2d<T>::Run Conv2d<T>::tap_run(TapRange rows, Index i, Index shift) const {
  // Output value k = oh * W + ow of rows [rows.begin, rows.end) reads input value k + offset
  // of the plane; the run keeps the k whose input lies inside the plane. The ones cut off
  // are at the ends of the first and last rows, on the padding.
  const Index width = image_.width;
  Run run;
  run.offset = (i - options_.window.padding.h) * width + shift;
  run.begin = std::max(rows.begin * width, -run.offset);
  run.end = std::min(rows.end * width, image_.height * width - run.offset);
  return run;
}

// Note [a sample at a time]
// One sample's im2col matrix (P, K) is built and used at once, while it is in cache, and its
// product with W^T lands directly in the sample's output column: cols W^T is (P, O) column-
// major, which is (O, Ho, Wo) row-major. Backward rebuilds the same matrix rather than
// keeping B of them from forward: a gather costs far less than the products that read it,
// and the scratch stays one sample's size.
template <typename T>
void Conv2d<T>::forward(const PassContext&, ConstMatrixView<T> x, MatrixView<T> y) {
  const Index p = positions(), k = taps(), o = options_.out;
  ConstMatrixView<T> wt(weight_, k, o);
  for (Index s = 0; s < x.cols(); ++s) {
    const T* xs = x.data() + s * this->inputs();
    if (cols_) im2col(xs, cols_);
    ConstMatrixView<T> cols(cols_ ? cols_ : xs, p, k);
    MatrixView<T> ys(y.data() + s * this->outputs(), p, o);
    // The bias goes in first and the product is added to it (as in Linear).
    if (bias_) {
      ys.rowwise() = ConstRowView<T>(bias_, o);
      kernels::multiply(ys, cols, kernels::Op::kNone, wt, kernels::Op::kNone, kernels::Accumulate::kAdd);  // y = cols W^T + b: (P, K)(K, O)
    } else {
      kernels::multiply(ys, cols, kernels::Op::kNone, wt, kernels::Op::kNone, kernels::Accumulate::kOverwrite);
    }
  }
}

template <typename T>
void Conv2d<T>::backward(const PassContext&, ConstMatrixView<T> x, ConstMatrixView<T>,
                         ConstMatrixView<T> dy, MatrixView<T>* dx) {
  const Index p = positions(), k = taps(), o = options_.out;
  ConstMatrixView<T> wt(weight_, k, o);
  MatrixView<T> dwt(weight_grad_, k, o);
  for (Index s = 0; s < x.cols(); ++s) {
    const T* xs = x.data() + s * this->inputs();
    if (cols_) im2col(xs, cols_);
    ConstMatrixView<T> cols(cols_ ? cols_ : xs, p, k);
    ConstMatrixView<T> dys(dy.data() + s * this->outputs(), p, o);
    kernels::multiply(dwt, cols, kernels::Op::kTranspose, dys, kernels::Op::kNone, kernels::Accumulate::kAdd);  // dW^T += cols^T dy: (K, P)(P, O)
    if (bias_grad_) VectorView<T>(bias_grad_, o) += dys.colwise().sum().transpose();
    if (!dx) continue;
    T* dxs = dx->data() + s * this->inputs();
    // dcols = dy W: (P, O)(O, K); cols is no longer needed, so its memory takes dcols.
    MatrixView<T> dcols(cols_ ? cols_ : dxs, p, k);
    kernels::multiply(dcols, dys, kernels::Op::kNone, wt, kernels::Op::kTranspose, kernels::Accumulate::kOverwrite);
    if (cols_) col2im(cols_, dxs);
  }
}

template <typename T>
void Conv2d<T>::gemm_calls(Index batch, std::vector<kernels::GemmCall>& calls) const {
  const Index p = positions(), k = taps(), o = options_.out;
  // Per sample.
  calls.push_back({{p, o, k, kernels::Op::kNone, kernels::Op::kNone}, batch, kernels::GemmRole::kForward});
  calls.push_back({{k, o, p, kernels::Op::kTranspose, kernels::Op::kNone}, batch, kernels::GemmRole::kWeightGradient});
  calls.push_back({{p, k, o, kernels::Op::kNone, kernels::Op::kTranspose}, batch, kernels::GemmRole::kInputGradient});
}

template class Conv2d<float>;
template class Conv2d<double>;

}  // namespace mpiddp::nn
