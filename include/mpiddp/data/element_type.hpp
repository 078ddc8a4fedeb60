#pragma once
// The element types data files store, and decoding them into the training dtype in chunks:
// conversion happens once, at load time, never per epoch.
#include <cstddef>
#include <cstdint>
#include <string>

#include "mpiddp/core/types.hpp"
#include "mpiddp/data/input_file.hpp"

namespace mpiddp::data {

enum class ElementType { kUint8, kInt8, kUint16, kInt16, kInt32, kInt64, kFloat32, kFloat64 };

size_t element_size(ElementType type);
const char* element_name(ElementType type);  // "uint8", ..., "float64"
bool is_integer(ElementType type);

// How the elements of an array are laid out in its source.
struct Encoding {
  ElementType type = ElementType::kFloat32;
  bool big_endian = false;  // IDX is big-endian; .npy as accepted here is little-endian
};

// Reads `count` elements from `source` and stores value * scale as T in `out` (count).
// Every value is checked finite: a DataError names the file and the sample, where sample =
// element / row_width (row_width elements per sample).
template <typename T>
void read_values(ByteSource& source, Encoding encoding, uint64_t count, uint64_t row_width,
                 double scale, T* out);

// What integers read_labels reads, for its messages: how many per sample (a class per
// position, or a sequence of token ids) and what each is called.
struct LabelLayout {
  uint64_t per_sample = 1;
  const char* singular = "class label";
  const char* plural = "class labels";
  const char* element = "sample";  // what a message counts: "sample 3 (0-based)"
};
inline LabelLayout token_id_layout(uint64_t per_sample) { return {per_sample, "token id", "token ids", "sample"}; }

// Reads `count` integers (class labels, or token ids) into `out`; a DataError names the file,
// sample (and position, when a sample holds several) of any outside [0, classes). Float
// encodings are refused: they must be integers.
void read_labels(ByteSource& source, Encoding encoding, uint64_t count, Index classes,
                 int32_t* out, const LabelLayout& layout = {});

// The NaN/Inf check on values already in memory: values[0] is element first_element of the
// whole array, so a chunked caller still reports the right sample (element / row_width).
template <typename T>
void check_finite(const T* values, uint64_t count, uint64_t row_width, uint64_t first_element,
                  const std::string& file);

}  // namespace mpiddp::data
