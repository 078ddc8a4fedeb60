#include "mpiddp/data/element_type.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "mpiddp/core/error.hpp"

namespace mpiddp::data {

namespace {

// Values are decoded in chunks of this many bytes, so converting a file needs only the
// output array plus one small buffer.
constexpr size_t kChunkBytes = 1 << 20;

template <typename Stored>
Stored load_one(const unsigned char* p, bool big_endian) {
  using Bits = std::conditional_t<sizeof(Stored) == 1, uint8_t,
               std::conditional_t<sizeof(Stored) == 2, uint16_t,
               std::conditional_t<sizeof(Stored) == 4, uint32_t, uint64_t>>>;
  Bits bits;
  std::memcpy(&bits, p, sizeof bits);
  if (big_endian != (std::endian::native == std::endian::big)) {
    if constexpr (sizeof(Bits) == 2) bits = __builtin_bswap16(bits);
    if constexpr (sizeof(Bits) == 4) bits = __builtin_bswap32(bits);
    if constexpr (sizeof(Bits) == 8) bits = __builtin_bswap64(bits);
  }
  return std::bit_cast<Stored>(bits);
}

// Calls fn(i, value) for `count` elements of `type` at `p`, value widened to Wide.
template <typename Wide, typename Fn>
void decode(const unsigned char* p, Encoding e, size_t count, Fn&& fn) {
  const size_t size = element_size(e.type);
  auto each = [&](auto tag) {
    using Stored = decltype(tag);
    for (size_t i = 0; i < count; ++i)
      fn(i, static_cast<Wide>(load_one<Stored>(p + i * size, e.big_endian)));
  };
  switch (e.type) {
    case ElementType::kUint8: each(uint8_t{}); break;
    case ElementType::kInt8: each(int8_t{}); break;
    case ElementType::kUint16: each(uint16_t{}); break;
    case ElementType::kInt16: each(int16_t{}); break;
    case ElementType::kInt32: each(int32_t{}); break;
    case ElementType::kInt64: each(int64_t{}); break;
    case ElementType::kFloat32: each(float{}); break;
    case ElementType::kFloat64: each(double{}); break;
  }
}

[[noreturn]] void non_finite(const std::string& file, uint64_t sample, double value) {
  throw DataError(file + ": sample " + std::to_string(sample) + " (0-based) holds " +
                  (std::isnan(value) ? "NaN" : "Inf") + "; every value must be finite");
}

// Reads `count` elements in chunks and calls fn(first_element_of_chunk, chunk_bytes, n).
template <typename Fn>
void for_each_chunk(ByteSource& source, Encoding e, uint64_t count, Fn&& fn) {
  const size_t size = element_size(e.type);
  const size_t per_chunk = kChunkBytes / size;
  std::vector<unsigned char> buffer(std::min<uint64_t>(count, per_chunk) * size);
  for (uint64_t first = 0; first < count; first += per_chunk) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(per_chunk, count - first));
    source.read(buffer.data(), n * size);
    fn(first, buffer.data(), n);
  }
}

}  // namespace

size_t element_size(ElementType type) {
  switch (type) {
    case ElementType::kUint8:
    case ElementType::kInt8: return 1;
    case ElementType::kUint16:
    case ElementType::kInt16: return 2;
    case ElementType::kInt32:
    case ElementType::kFloat32: return 4;
    case ElementType::kInt64:
    case ElementType::kFloat64: return 8;
  }
  return 0;
}

const char* element_name(ElementType type) {
  switch (type) {
    case ElementType::kUint8: return "uint8";
    case ElementType::kInt8: return "int8";
    case ElementType::kUint16: return "uint16";
    case ElementType::kInt16: return "int16";
    case ElementType::kInt32: return "int32";
    case ElementType::kInt64: return "int64";
    case ElementType::kFloat32: return "float32";
    case ElementType::kFloat64: return "float64";
  }
  return "?";
}

bool is_integer(ElementType type) {
  return type != ElementType::kFloat32 && type != ElementType::kFloat64;
}

template <typename T>
void check_finite(const T* values, uint64_t count, uint64_t row_width, uint64_t first_element,
                  const std::string& file) {
  for (uint64_t i = 0; i < count; ++i)
    if (!std::isfinite(values[i])) non_finite(file, (first_element + i) / row_width, values[i]);
}

template <typename T>
void read_values(ByteSource& source, Encoding encoding, uint64_t count, uint64_t row_width,
                 double scale, T* out) {
  const bool integer = is_integer(encoding.type);
  for_each_chunk(source, encoding, count, [&](uint64_t first, const unsigned char* bytes, size_t n) {
    T* dst = out + first;
    if (scale == 1.0) {
      decode<T>(bytes, encoding, n, [&](size_t i, T v) { dst[i] = v; });
    } else {
      // Scaled in double, then rounded once to T.
      decode<double>(bytes, encoding, n,
                     [&](size_t i, double v) { dst[i] = static_cast<T>(v * scale); });
    }
    // Integers are always finite; the scan only matters for float data.
    if (!integer) check_finite(dst, n, row_width, first, source.name());
  });
}

void read_labels(ByteSource& source, Encoding encoding, uint64_t count, Index classes,
                 int32_t* out, const LabelLayout& layout) {
  if (!is_integer(encoding.type))
    throw DataError(source.name() + ": " + layout.plural + " are stored as " +
                    element_name(encoding.type) +
                    "; they must be integers (uint8, int32 or int64), e.g. y.astype('int64')");
  for_each_chunk(source, encoding, count, [&](uint64_t first, const unsigned char* bytes, size_t n) {
    decode<int64_t>(bytes, encoding, n, [&](size_t i, int64_t label) {
      if (label < 0 || label >= classes) {
        const uint64_t element = first + i;
        const std::string position =
            layout.per_sample > 1 ? ", position " + std::to_string(element % layout.per_sample) + "," : "";
        throw DataError(source.name() + ": " + layout.element + " " + std::to_string(element / layout.per_sample) +
                        " (0-based)" + position + " has " + layout.singular + " " + std::to_string(label) +
                        ", outside [0, " + std::to_string(classes) + ")");
      }
      out[first + i] = static_cast<int32_t>(label);
    });
  });
}

template void check_finite<float>(const float*, uint64_t, uint64_t, uint64_t, const std::string&);
template void check_finite<double>(const double*, uint64_t, uint64_t, uint64_t, const std::string&);
template void read_values<float>(ByteSource&, Encoding, uint64_t, uint64_t, double, float*);
template void read_values<double>(ByteSource&, Encoding, uint64_t, uint64_t, double, double*);

}  // namespace mpiddp::data
