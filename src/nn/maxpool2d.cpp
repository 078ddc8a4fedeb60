#include "mpiddp/nn/maxpool2d.hpp"

#include <algorithm>
#include <cstdint>

#include "mpiddp/core/error.hpp"

namespace mpiddp::nn {

namespace {

// wins ? a : b by bit masks: which value wins is data, and a branch on it would be
// mispredicted half the time.
int32_t blend(bool wins, int32_t a, int32_t b) {
  const int32_t mask = -int32_t(wins);
  return (a & mask) | (b & ~mask);
}

// One channel: x: (H, W) -> out: (Ho, Wo), at: (Ho, Wo) the offset of each maximum in x plus
// `plane`. KH, KW > 0 say the kernel is KH x KW without padding, known when compiling: every
// window is whole and its loops unroll.
template <typename T, Index KH = 0, Index KW = 0>
void max_pool_plane(const T* x, const Window2d& w, Index height, Index width, Index out_h,
                    Index out_w, int32_t plane, T* out, int32_t* at) {
  for (Index oh = 0; oh < out_h; ++oh) {
    const Index h0 = oh * w.stride.h - w.padding.h;
    const Index h_begin = KH ? h0 : std::max<Index>(h0, 0);
    const Index rows = KH ? KH : std::min(h0 + w.kernel.h, height) - h_begin;
    for (Index ow = 0; ow < out_w; ++ow) {
      const Index w0 = ow * w.stride.w - w.padding.w;
      const Index w_begin = KW ? w0 : std::max<Index>(w0, 0);
      const Index columns = KW ? KW : std::min(w0 + w.kernel.w, width) - w_begin;
      // The padding is -inf: only input values compete, and every window holds one, since
      // padding <= kernel / 2. As PyTorch: the scan starts at the window's first input
      // value, the first maximum wins, and so does a NaN. Only the offset is selected; the
      // value is read back through it (a select of floats compiles to a branch).
      int32_t best_at = static_cast<int32_t>(h_begin * width + w_begin);
      for (Index r = 0; r < rows; ++r)
        for (Index q = 0; q < columns; ++q) {
          const int32_t i = static_cast<int32_t>((h_begin + r) * width + w_begin + q);
          const T v = x[i], best = x[best_at];
          best_at = blend((v > best) | (v != v), i, best_at);
        }
      *out++ = x[best_at];
      *at++ = plane + best_at;
    }
  }
}

// The usual pool (maxpool2d 2 or 3: no padding, the stride the kernel), the same scan and
// the same winners as max_pool_plane, with the best value kept beside its offset: the
// windows of an output row tile the input rows, so the loop over them vectorises (the
// selects become blends) and no load waits on the offset chosen before it. Measured on the
// cnn's 28 x 28 planes: 3.5 times max_pool_plane's rate.
template <typename T, Index KH, Index KW>
void max_pool_tiled_plane(const T* x, Index width, Index out_h, Index out_w, int32_t plane,
                          T* out, int32_t* at) {
  for (Index oh = 0; oh < out_h; ++oh) {
    const T* rows = x + oh * KH * width;  // (KH, W): the input rows of output row oh
    const int32_t first = plane + static_cast<int32_t>(oh * KH * width);
    T* out_row = out + oh * out_w;
    int32_t* at_row = at + oh * out_w;
    for (Index ow = 0; ow < out_w; ++ow) {
      T best = rows[ow * KW];
      int32_t best_at = first + static_cast<int32_t>(ow * KW);
#pragma GCC unroll 16
      for (Index t = 1; t < KH * KW; ++t) {
        const Index i = (t / KW) * width + ow * KW + t % KW;
        const T v = rows[i];
        const bool wins = (v > best) | (v != v);
        best = wins ? v : best;
        best_at = wins ? first + static_cast<int32_t>(i) : best_at;
      }
      out_row[ow] = best;
      at_row[ow] = best_at;
    }
  }
}

}  // namespace

template <typename T>
MaxPool2d<T>::MaxPool2d(const Pool2dOptions& options, const Shape& input, const std::string& key)
    : Layer<T>(input, pool_output(options.window, input, key, "maxpool2d")),
      window_(options.window),
      image_{input[0], input[1], input[2]} {
  if (this->inputs() > INT32_MAX)
    throw ConfigError(key, "maxpool2d keeps int32 offsets into a sample, but " + shape_text(input) +
                               " has more values than that");
}

template <typename T>
void MaxPool2d<T>::forward(const PassContext&, ConstMatrixView<T> x, MatrixView<T> y) {
  const Window2d& w = window_;
  const Index height = image_.height, width = image_.width;
  const Index out_h = this->output_shape()[1], out_w = this->output_shape()[2];
  const Index inputs = this->inputs(), outputs = this->outputs(), out_plane = out_h * out_w;
  const bool unpadded = w.padding == Pair2d{0, 0};
  const bool tiled = unpadded && w.stride == w.kernel;
  auto tiled_plane = !tiled                         ? nullptr
                     : w.kernel == Pair2d{2, 2}     ? &max_pool_tiled_plane<T, 2, 2>
                     : w.kernel == Pair2d{3, 3}     ? &max_pool_tiled_plane<T, 3, 3>
                                                    : nullptr;
  auto plane = unpadded && w.kernel == Pair2d{2, 2}   ? &max_pool_plane<T, 2, 2>
               : unpadded && w.kernel == Pair2d{3, 3} ? &max_pool_plane<T, 3, 3>
                                                      : &max_pool_plane<T>;
  for (Index s = 0; s < x.cols(); ++s)
    for (Index c = 0; c < image_.channels; ++c) {
      const Index offset = c * height * width;
      const T* in = x.data() + s * inputs + offset;
      T* out = y.data() + s * outputs + c * out_plane;
      int32_t* at = argmax_ + s * outputs + c * out_plane;
      if (tiled_plane)
        tiled_plane(in, width, out_h, out_w, static_cast<int32_t>(offset), out, at);
      else
        plane(in, w, height, width, out_h, out_w, static_cast<int32_t>(offset), out, at);
    }
}

template <typename T>
void MaxPool2d<T>::backward(const PassContext&, ConstMatrixView<T>, ConstMatrixView<T>,
                            ConstMatrixView<T> dy, MatrixView<T>* dx) {
  if (!dx) return;
  dx->setZero();
  for (Index s = 0; s < dy.cols(); ++s) {
    T* dxs = dx->data() + s * this->inputs();
    const T* dys = dy.data() + s * this->outputs();
    const int32_t* at = argmax_ + s * this->outputs();
    for (Index o = 0; o < this->outputs(); ++o) dxs[at[o]] += dys[o];
  }
}

template class MaxPool2d<float>;
template class MaxPool2d<double>;

}  // namespace mpiddp::nn
