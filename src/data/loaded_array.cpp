#include "mpiddp/data/loaded_array.hpp"

#include <unistd.h>

#include <algorithm>
#include <bit>

#include "mpiddp/core/error.hpp"

namespace mpiddp::data {

namespace {

template <typename T>
constexpr ElementType native_type() {
  return sizeof(T) == 4 ? ElementType::kFloat32 : ElementType::kFloat64;
}

template <typename T>
bool can_map(Encoding encoding, uint64_t offset, double scale) {
  const bool native_order = encoding.big_endian == (std::endian::native == std::endian::big);
  return encoding.type == native_type<T>() && native_order && scale == 1.0 &&
         offset % alignof(T) == 0;  // mmap's base is page aligned, so this aligns every T
}

}  // namespace

template <typename T>
LoadedArray<T> load_values(const InputFile& file, uint64_t offset, Encoding encoding,
                           uint64_t count, uint64_t row_width, double scale) {
  if (!can_map<T>(encoding, offset, scale)) {
    FileSlice slice(file, offset);
    return load_values<T>(slice, encoding, count, row_width, scale);
  }
  LoadedArray<T> array;
  auto mapping = file.map(offset, count * sizeof(T));
  array.data = reinterpret_cast<const T*>(mapping.get());
  array.storage = mapping;
  array.mapped = true;
  // The finiteness scan goes through a small reused buffer, not through the mapping.
  constexpr uint64_t kChunk = (1 << 20) / sizeof(T);
  std::vector<T> chunk(static_cast<size_t>(std::min(count, kChunk)));
  for (uint64_t first = 0; first < count; first += kChunk) {
    const uint64_t n = std::min(kChunk, count - first);
    file.read_at(offset + first * sizeof(T), chunk.data(), n * sizeof(T));
    check_finite(chunk.data(), n, row_width, first, file.path());
  }
  return array;
}

void check_fits_in_memory(uint64_t bytes, const std::string& file) {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return;  // unknown: let the allocation decide
  const uint64_t physical = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  if (bytes > physical)
    throw DataError(file + ": would need " + std::to_string(bytes >> 20) + " MiB in memory, more "
                    "than this machine's " + std::to_string(physical >> 20) + " MiB");
}

template <typename T>
LoadedArray<T> load_values(ByteSource& source, Encoding encoding, uint64_t count,
                           uint64_t row_width, double scale) {
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(count, sizeof(T), &bytes)) bytes = UINT64_MAX;
  check_fits_in_memory(bytes, source.name());
  auto values = std::make_shared<std::vector<T>>(static_cast<size_t>(count));
  read_values(source, encoding, count, row_width, scale, values->data());
  LoadedArray<T> array;
  array.data = values->data();
  array.storage = values;
  return array;
}

LoadedArray<int32_t> load_labels(ByteSource& source, Encoding encoding, uint64_t count,
                                 Index classes, const LabelLayout& layout) {
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(count, sizeof(int32_t), &bytes)) bytes = UINT64_MAX;
  check_fits_in_memory(bytes, source.name());
  auto labels = std::make_shared<std::vector<int32_t>>(static_cast<size_t>(count));
  read_labels(source, encoding, count, classes, labels->data(), layout);
  LoadedArray<int32_t> array;
  array.data = labels->data();
  array.storage = labels;
  return array;
}

std::shared_ptr<const void> keep_together(std::vector<std::shared_ptr<const void>> parts) {
  return std::make_shared<const std::vector<std::shared_ptr<const void>>>(std::move(parts));
}

template LoadedArray<float> load_values<float>(const InputFile&, uint64_t, Encoding, uint64_t,
                                               uint64_t, double);
template LoadedArray<double> load_values<double>(const InputFile&, uint64_t, Encoding, uint64_t,
                                                 uint64_t, double);
template LoadedArray<float> load_values<float>(ByteSource&, Encoding, uint64_t, uint64_t, double);
template LoadedArray<double> load_values<double>(ByteSource&, Encoding, uint64_t, uint64_t, double);

}  // namespace mpiddp::data
