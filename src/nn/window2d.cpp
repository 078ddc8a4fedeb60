#include "mpiddp/nn/window2d.hpp"

#include "mpiddp/core/error.hpp"

namespace mpiddp::nn {

namespace {

// Large enough for any image, small enough that H + 2 p never overflows.
constexpr Index kMaxWindow = Index(1) << 20;

std::string shown_value(const io::Json& value) {
  return value.dump(-1, ' ', false, io::Json::error_handler_t::replace);
}

}  // namespace

Pair2d parse_pair(io::JsonSection& section, const std::string& key,
                  const std::optional<Pair2d>& fallback, Index min, const std::string& form) {
  const io::Json* value = section.raw(key);
  Pair2d pair;
  if (!value) {
    if (!fallback) throw ConfigError(section.key_path(key), "required key is missing");
    pair = *fallback;
  } else if (!value->is_number()) {
    const std::string expected = "expected an integer >= " + std::to_string(min) +
                                 " or a list of two, " + form + ", got " + shown_value(*value);
    if (!value->is_array() || value->size() != 2)
      throw ConfigError(section.key_path(key), expected);
    Index both[2];
    for (size_t i = 0; i < 2; ++i) {
      const io::Json& item = (*value)[i];
      if (!item.is_number_integer() || item.get<int64_t>() < min ||
          item.get<int64_t>() > kMaxWindow)
        throw ConfigError(section.key_path(key), expected);
      both[i] = item.get<int64_t>();
    }
    pair = {both[0], both[1]};
  } else {
    // One int: JsonSection checks its type and range and names the key.
    const Index n = section.integer(key, 0, min, kMaxWindow);
    pair = {n, n};
  }
  section.put(key, pair.h == pair.w ? io::Json(pair.h) : io::Json::array({pair.h, pair.w}));
  return pair;
}

Window2d parse_window(io::JsonSection& section, const std::optional<Pair2d>& default_stride) {
  Window2d window;
  window.kernel = parse_pair(section, "kernel", std::nullopt, 1, "[kh, kw]");
  window.stride = parse_pair(section, "stride", default_stride ? *default_stride : window.kernel, 1,
                             "[sh, sw]");
  window.padding = parse_pair(section, "padding", Pair2d{0, 0}, 0, "[ph, pw]");
  return window;
}

Pool2dOptions Pool2dOptions::parse(io::JsonSection& section) {
  Pool2dOptions options;
  options.window = parse_window(section, std::nullopt);
  const Window2d& w = options.window;
  if (w.padding.h > w.kernel.h / 2 || w.padding.w > w.kernel.w / 2)
    throw ConfigError(section.key_path("padding"),
                      "padding " + shape_tag({w.padding.h, w.padding.w}) +
                          " is more than half the kernel " + shape_tag({w.kernel.h, w.kernel.w}) +
                          "; expected at most " + shape_tag({w.kernel.h / 2, w.kernel.w / 2}));
  return options;
}

std::string pool_tag(const Window2d& window) {
  std::string tag = pair_tag(window.kernel);
  if (!(window.stride == window.kernel)) tag += "s" + pair_tag(window.stride);
  if (!(window.padding == Pair2d{0, 0})) tag += "p" + pair_tag(window.padding);
  return tag;
}

Image image_input(const Shape& input, const std::string& key, const std::string& layer_type) {
  if (input.size() != 3)
    throw ConfigError(key,
                      layer_type + " needs an image input (C, H, W) but gets " + shape_text(input));
  return {input[0], input[1], input[2]};
}

Pair2d window_output(const Window2d& window, const Image& input, const Shape& input_shape,
                     const std::string& key) {
  const Index padded_h = input.height + 2 * window.padding.h;
  const Index padded_w = input.width + 2 * window.padding.w;
  if (window.kernel.h > padded_h || window.kernel.w > padded_w)
    throw ConfigError(key + ".kernel", "kernel " + shape_tag({window.kernel.h, window.kernel.w}) +
                                           " is larger than the input " + shape_text(input_shape) +
                                           " with padding " +
                                           shape_tag({window.padding.h, window.padding.w}) + " (" +
                                           shape_tag({padded_h, padded_w}) + " padded)");
  return {(padded_h - window.kernel.h) / window.stride.h + 1,
          (padded_w - window.kernel.w) / window.stride.w + 1};
}

Shape pool_output(const Window2d& window, const Shape& input, const std::string& key,
                  const std::string& layer_type) {
  const Image image = image_input(input, key, layer_type);
  const Pair2d size = window_output(window, image, input, key);
  return {image.channels, size.h, size.w};
}

std::string pair_tag(const Pair2d& pair) {
  return pair.h == pair.w ? std::to_string(pair.h) : shape_tag({pair.h, pair.w});
}

}  // namespace mpiddp::nn
