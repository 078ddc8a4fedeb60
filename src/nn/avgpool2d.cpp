#include "mpiddp/nn/avgpool2d.hpp"

#include <algorithm>

namespace mpiddp::nn {

template <typename T>
AvgPool2d<T>::AvgPool2d(const Pool2dOptions& options, const Shape& input, const std::string& key)
    : Layer<T>(input, pool_output(options.window, input, key, "avgpool2d")),
      window_(options.window),
      image_{input[0], input[1], input[2]} {}

// The padding is zeros and counts: every window divides by kh * kw (count_include_pad).
// In floor mode no window reaches past the padding, so PyTorch's divisor is kh * kw too.
// The loops run over the taps (i, j) of the window outside and a row of outputs inside, so
// the innermost loop is a plain sum along the row; taps on the padding add nothing and are
// skipped.
template <typename T>
void AvgPool2d<T>::forward(const PassContext&, ConstMatrixView<T> x, MatrixView<T> y) {
  const Window2d& w = window_;
  const Index height = image_.height, width = image_.width;
  const Index out_h = this->output_shape()[1], out_w = this->output_shape()[2];
  const Index inputs = this->inputs(), outputs = this->outputs();
  const T divisor = static_cast<T>(w.kernel.h * w.kernel.w);
  for (Index s = 0; s < x.cols(); ++s) {
    const T* xs = x.data() + s * inputs;  // (C, H, W)
    T* out = y.data() + s * outputs;      // (C, Ho, Wo), one row at a time
    for (Index c = 0; c < image_.channels; ++c) {
      const T* plane = xs + c * height * width;
      for (Index oh = 0; oh < out_h; ++oh, out += out_w) {
        std::fill(out, out + out_w, T(0));
        for (Index i = 0; i < w.kernel.h; ++i) {
          const Index ih = oh * w.stride.h - w.padding.h + i;
          if (ih < 0 || ih >= height) continue;
          const T* row = plane + ih * width;  // (W)
          for (Index j = 0; j < w.kernel.w; ++j) {
            const TapRange inside = inside_taps(out_w, w.stride.w, w.padding.w, j, width);
            const Index shift = j - w.padding.w;
            for (Index ow = inside.begin; ow < inside.end; ++ow)
              out[ow] += row[ow * w.stride.w + shift];
          }
        }
        for (Index ow = 0; ow < out_w; ++ow) out[ow] /= divisor;
      }
    }
  }
}

// dx = dy / (kh * kw) added to each input value of the window; overlapping windows add up.
template <typename T>
void AvgPool2d<T>::backward(const PassContext&, ConstMatrixView<T>, ConstMatrixView<T>,
                            ConstMatrixView<T> dy, MatrixView<T>* dx) {
  if (!dx) return;
  const Window2d& w = window_;
  const Index height = image_.height, width = image_.width;
  const Index out_h = this->output_shape()[1], out_w = this->output_shape()[2];
  const Index inputs = this->inputs(), outputs = this->outputs();
  const T divisor = static_cast<T>(w.kernel.h * w.kernel.w);
  dx->setZero();
  for (Index s = 0; s < dy.cols(); ++s) {
    T* dxs = dx->data() + s * inputs;
    const T* dout = dy.data() + s * outputs;  // (C, Ho, Wo), one row at a time
    for (Index c = 0; c < image_.channels; ++c) {
      T* plane = dxs + c * height * width;
      for (Index oh = 0; oh < out_h; ++oh, dout += out_w) {
        for (Index i = 0; i < w.kernel.h; ++i) {
          const Index ih = oh * w.stride.h - w.padding.h + i;
          if (ih < 0 || ih >= height) continue;
          T* row = plane + ih * width;  // (W)
          for (Index j = 0; j < w.kernel.w; ++j) {
            const TapRange inside = inside_taps(out_w, w.stride.w, w.padding.w, j, width);
            const Index shift = j - w.padding.w;
            for (Index ow = inside.begin; ow < inside.end; ++ow)
              row[ow * w.stride.w + shift] += dout[ow] / divisor;
          }
        }
      }
    }
  }
}

template class AvgPool2d<float>;
template class AvgPool2d<double>;

}  // namespace mpiddp::nn
