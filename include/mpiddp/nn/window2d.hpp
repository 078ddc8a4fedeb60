#pragma once
// What conv2d and the 2-d pools share: a sliding window over an image (C, H, W) — its
// kernel, stride and zero padding, each "an int or [h, w]" in the config — and the
// arithmetic of where it lands.
//
// Dimension letters: C channels, H x W the input image, Ho x Wo the output image.
// Output size, as PyTorch (floor mode): Ho = floor((H + 2 ph - kh) / sh) + 1.
#include <optional>
#include <string>

#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/nn/shape.hpp"

namespace mpiddp::nn {

// One size per image axis: [h, w].
struct Pair2d {
  Index h = 0, w = 0;
  bool operator==(const Pair2d&) const = default;
};

struct Window2d {
  Pair2d kernel{1, 1}, stride{1, 1}, padding{0, 0};
};

// Reads `key` as an int n (meaning [n, n]) or a list [h, w] of two ints, each >= min.
// Absent: fallback, or a ConfigError "required key is missing" when there is none. The
// resolved config records n when h == w, else [h, w].
Pair2d parse_pair(io::JsonSection& section, const std::string& key,
                  const std::optional<Pair2d>& fallback, Index min, const std::string& form);

// The three window keys: kernel (required), stride (default_stride, or the kernel when
// absent: the pools' default), padding (default 0).
Window2d parse_window(io::JsonSection& section, const std::optional<Pair2d>& default_stride);

// The keys of maxpool2d and avgpool2d: kernel (required), stride (default: the kernel),
// padding (default 0, at most half the kernel, as PyTorch requires).
struct Pool2dOptions {
  Window2d window;
  static Pool2dOptions parse(io::JsonSection& section);
};

// "2" for a kernel of 2 with the default stride and no padding, "3s2p1", "2x3s1": the
// pools' descriptions after their type name.
std::string pool_tag(const Window2d& window);

// A per-sample image (C, H, W).
struct Image {
  Index channels = 0, height = 0, width = 0;
  Index pixels() const { return height * width; }
};

// The input as an image; a ConfigError naming `key` when it is not (C, H, W). layer_type
// names the layer in the message ("conv2d needs ...").
Image image_input(const Shape& input, const std::string& key, const std::string& layer_type);

// The output image size of a window over an input image; a ConfigError on `key`.kernel when
// the kernel is larger than the padded input.
Pair2d window_output(const Window2d& window, const Image& input, const Shape& input_shape,
                     const std::string& key);

// (C, Ho, Wo) of a pool over `input`, after the checks of image_input and window_output.
Shape pool_output(const Window2d& window, const Shape& input, const std::string& key,
                  const std::string& layer_type);

// "3" for [3, 3], "3x5" otherwise: the compact form of model descriptions.
std::string pair_tag(const Pair2d& pair);

// The outputs o in [begin, end) whose tap at o * stride - pad + offset lies inside [0, in):
// the rest read zero padding. Used by im2col, col2im and the pools' inner loops.
struct TapRange {
  Index begin = 0, end = 0;
};
inline TapRange inside_taps(Index outputs, Index stride, Index pad, Index offset, Index in) {
  // o * stride + (offset - pad) >= 0  <=>  o >= ceil((pad - offset) / stride)
  // o * stride + (offset - pad) < in  <=>  o <= floor((in - 1 + pad - offset) / stride)
  const Index shift = pad - offset;
  TapRange range;
  range.begin = shift > 0 ? (shift + stride - 1) / stride : 0;
  const Index last = in - 1 + shift;
  range.end = last < 0 ? 0 : last / stride + 1;
  if (range.end > outputs) range.end = outputs;
  if (range.begin > range.end) range.begin = range.end;
  return range;
}

}  // namespace mpiddp::nn
