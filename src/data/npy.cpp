#include "mpiddp/data/npy.hpp"

#include <cctype>
#include <cstring>
#include <map>
#include <variant>

#include "mpiddp/core/error.hpp"
#include "mpiddp/data/loaded_array.hpp"

namespace mpiddp::data {

namespace {

// A header longer than this is not a NumPy header (NumPy itself writes < 1 KiB, and by
// default refuses to read headers over 10 000 bytes).
constexpr uint32_t kMaxHeaderBytes = 1 << 16;
constexpr unsigned char kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

// The header is a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 784), }
// Values are strings, booleans or tuples of integers; nothing else is accepted.
using HeaderValue = std::variant<std::string, bool, std::vector<uint64_t>>;

class HeaderParser {
 public:
  HeaderParser(std::string text, const std::string& file) : text_(std::move(text)), file_(file) {}

  std::map<std::string, HeaderValue> parse_dict() {
    std::map<std::string, HeaderValue> dict;
    expect('{');
    while (!peek('}')) {
      const std::string key = parse_string();
      expect(':');
      dict[key] = parse_value();
      if (!peek('}')) expect(',');
    }
    expect('}');
    return dict;
  }

 private:
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool peek(char c) {
    skip_space();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw DataError(file_ + ": malformed .npy header at character " + std::to_string(pos_) +
                    ": " + what + " in \"" + text_ + "\"");
  }
  void expect(char c) {
    if (!peek(c)) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string parse_string() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) fail("expected a string");
    const char quote = text_[pos_++];
    const auto end = text_.find(quote, pos_);
    if (end == std::string::npos) fail("unterminated string");
    std::string s = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }
  uint64_t parse_integer() {
    skip_space();
    uint64_t value = 0;
    const size_t start = pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      if (__builtin_mul_overflow(value, 10u, &value) ||
          __builtin_add_overflow(value, static_cast<uint64_t>(text_[pos_] - '0'), &value))
        fail("dimension too large");
      ++pos_;
    }
    if (pos_ == start) fail("expected a non-negative integer");
    // Python 2 era files may write long integers as 60000L.
    if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;
    return value;
  }
  HeaderValue parse_value() {
    skip_space();
    if (peek('\'') || peek('"')) return parse_string();
    if (text_.compare(pos_, 4, "True") == 0) return pos_ += 4, true;
    if (text_.compare(pos_, 5, "False") == 0) return pos_ += 5, false;
    if (!peek('(')) fail("expected a string, True, False or a tuple");
    ++pos_;
    std::vector<uint64_t> tuple;
    while (!peek(')')) {
      tuple.push_back(parse_integer());
      if (tuple.size() > 32) fail("more than 32 dimensions");
      if (!peek(')')) expect(',');
    }
    expect(')');
    return tuple;
  }

  std::string text_;
  const std::string& file_;
  size_t pos_ = 0;
};

Encoding parse_descr(const std::string& descr, const std::string& file) {
  static const std::map<std::string, ElementType> kTypes = {
      {"f4", ElementType::kFloat32}, {"f8", ElementType::kFloat64}, {"i4", ElementType::kInt32},
      {"i8", ElementType::kInt64},   {"u1", ElementType::kUint8},   {"u2", ElementType::kUint16}};
  const auto supported = [&] {
    return file + ": unsupported dtype '" + descr +
           "'; supported: '<f4' (float32), '<f8' (float64), '<i4' (int32), '<i8' (int64), "
           "'|u1' (uint8), '<u2' (uint16), all little-endian";
  };
  if (descr.size() != 3) throw DataError(supported());
  const auto it = kTypes.find(descr.substr(1));
  if (it == kTypes.end()) throw DataError(supported());
  const char order = descr[0];
  if (order == '>' && it->second != ElementType::kUint8)
    throw DataError(file + ": dtype '" + descr + "' is big-endian; save it little-endian, e.g. "
                           "np.save(path, a.astype(a.dtype.newbyteorder('<')))");
  if (order != '<' && order != '|' && order != '>') throw DataError(supported());
  return {it->second, false};
}

template <typename V>
const V& header_entry(const std::map<std::string, HeaderValue>& dict, const char* key,
                      const std::string& file) {
  const auto it = dict.find(key);
  if (it == dict.end()) throw DataError(file + ": .npy header has no '" + key + "' entry");
  const V* value = std::get_if<V>(&it->second);
  if (!value) throw DataError(file + ": .npy header entry '" + key + "' has the wrong type");
  return *value;
}

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// Samples are the first dimension; the rest is flattened into the row.
uint64_t row_width(const NpyHeader& h) { return h.shape.empty() || h.shape[0] == 0 ? 1 : h.elements / h.shape[0]; }

}  // namespace

NpyHeader read_npy_header(const InputFile& file) {
  const std::string& path = file.path();
  unsigned char prefix[12] = {};
  if (file.size() < 10) throw DataError(path + ": too short for a .npy file (" +
                                        std::to_string(file.size()) + " bytes)");
  file.read_at(0, prefix, 10);
  if (std::memcmp(prefix, kMagic, 6) != 0)
    throw DataError(path + ": not a .npy file (the magic bytes \\x93NUMPY are missing)");
  const int major = prefix[6];
  if (major < 1 || major > 3)
    throw DataError(path + ": unsupported .npy format version " + std::to_string(major) + "." +
                    std::to_string(prefix[7]) + "; versions 1.0 to 3.0 are supported");
  uint64_t header_bytes = 0, text_start = 10;
  if (major == 1) {
    header_bytes = prefix[8] | (uint32_t{prefix[9]} << 8);
  } else {
    text_start = 12;
    if (file.size() < 12) throw DataError(path + ": truncated .npy header");
    file.read_at(10, prefix + 10, 2);
    header_bytes = prefix[8] | (uint32_t{prefix[9]} << 8) | (uint32_t{prefix[10]} << 16) |
                   (uint32_t{prefix[11]} << 24);
  }
  if (header_bytes > kMaxHeaderBytes)
    throw DataError(path + ": .npy header length " + std::to_string(header_bytes) +
                    " is over the limit of " + std::to_string(kMaxHeaderBytes) + " bytes");
  if (text_start + header_bytes > file.size())
    throw DataError(path + ": truncated: the .npy header claims " + std::to_string(header_bytes) +
                    " bytes but the file has " + std::to_string(file.size()));
  std::string text(header_bytes, '\0');
  file.read_at(text_start, text.data(), header_bytes);

  const auto dict = HeaderParser(text, path).parse_dict();
  NpyHeader h;
  h.encoding = parse_descr(header_entry<std::string>(dict, "descr", path), path);
  if (header_entry<bool>(dict, "fortran_order", path))
    throw DataError(path + ": array is in Fortran order; save it in C order, e.g. "
                           "np.save(path, np.ascontiguousarray(a))");
  h.shape = header_entry<std::vector<uint64_t>>(dict, "shape", path);
  h.data_offset = text_start + header_bytes;
  uint64_t bytes = element_size(h.encoding.type);
  for (uint64_t d : h.shape)
    if (__builtin_mul_overflow(h.elements, d, &h.elements) || __builtin_mul_overflow(bytes, d, &bytes))
      throw DataError(path + ": shape " + shape_text(h.shape) + " overflows 64-bit sizes");
  const uint64_t available = file.size() - h.data_offset;
  if (bytes != available)
    throw DataError(path + ": " + (bytes > available ? "truncated" : "has trailing bytes") +
                    ": shape " + shape_text(h.shape) + " of " + element_name(h.encoding.type) +
                    " needs " + std::to_string(bytes) + " data bytes, the file holds " +
                    std::to_string(available));
  return h;
}

template <typename T>
Dataset<T> load_npy(const NpyConfig& config) {
  InputFile x_file(config.features), y_file(config.targets);
  const NpyHeader xh = read_npy_header(x_file), yh = read_npy_header(y_file);
  if (xh.shape.empty() || xh.shape[0] == 0)
    throw DataError(config.features + ": features must have shape [samples, features] with "
                    "samples > 0, got " + shape_text(xh.shape));
  if (yh.shape.empty() || yh.shape.size() > 2)
    throw DataError(config.targets + ": targets must have shape [samples] or [samples, outputs], "
                    "got " + shape_text(yh.shape));
  if (yh.shape[0] != xh.shape[0])
    throw DataError(config.targets + ": has " + std::to_string(yh.shape[0]) + " samples but " +
                    config.features + " has " + std::to_string(xh.shape[0]));
  Dataset<T> d;
  d.name = config.features;
  d.samples = static_cast<Index>(xh.shape[0]);
  d.features = static_cast<Index>(row_width(xh));
  if (d.features == 0) throw DataError(config.features + ": has zero features per sample");
  if (xh.shape.size() > 2)  // [N, C, H, W] and the like keep their per-sample shape
    for (size_t i = 1; i < xh.shape.size(); ++i) d.shape.push_back(static_cast<Index>(xh.shape[i]));
  std::shared_ptr<const void> features;
  if (config.token_ids) {
    if (xh.shape.size() != 2)
      throw DataError(config.features + ": token ids must have shape [samples, positions], got " +
                      shape_text(xh.shape));
    FileSlice slice(x_file, xh.data_offset);
    const auto ids = load_labels(slice, xh.encoding, xh.elements, config.classes, token_id_layout(row_width(xh)));
    d.token_ids = ids.data;
    d.vocabulary = config.classes;
    features = ids.storage;
  } else {
    const auto x = load_values<T>(x_file, xh.data_offset, xh.encoding, xh.elements, row_width(xh), 1.0);
    d.x = x.data;
    features = x.storage;
  }
  std::shared_ptr<const void> targets;
  if (config.classes > 0) {
    // [samples, T] with T > 1: a class per position, as many positions as the features.
    const uint64_t per_sample = row_width(yh);
    if (per_sample != 1 && per_sample != static_cast<uint64_t>(d.features))
      throw DataError(config.targets + ": class labels must have shape [samples] or [samples, 1], or "
                      "[samples, " + std::to_string(d.features) + "] (one per position of " +
                      config.features + "), got " + shape_text(yh.shape));
    FileSlice slice(y_file, yh.data_offset);
    const auto labels = load_labels(slice, yh.encoding, yh.elements, config.classes, {per_sample});
    d.labels = labels.data;
    d.classes = config.classes;
    d.label_positions = static_cast<Index>(per_sample);
    targets = labels.storage;
  } else {
    d.outputs = static_cast<Index>(row_width(yh));
    if (d.outputs == 0) throw DataError(config.targets + ": has zero targets per sample");
    const auto y = load_values<T>(y_file, yh.data_offset, yh.encoding, yh.elements, row_width(yh), 1.0);
    d.y = y.data;
    targets = y.storage;
  }
  d.storage = keep_together({features, targets});
  return d;
}

template Dataset<float> load_npy<float>(const NpyConfig&);
template Dataset<double> load_npy<double>(const NpyConfig&);

}  // namespace mpiddp::data
