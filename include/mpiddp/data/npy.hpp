#pragma once
// NumPy .npy files (format versions 1.0, 2.0 and 3.0): little-endian float32, float64,
// int32, int64 or uint8 elements in C order.
//
// As a data source: features [samples, ...] (trailing dimensions are flattened, so
// [samples, 28, 28] gives 784 features; [samples] gives one), and targets [samples] or
// [samples, outputs]. With classes > 0 the targets are integer class labels: [samples] or
// [samples, 1] one per sample, [samples, T] one per position.
//
// Token data (token_ids, set when the model's first layer takes token ids): integer
// features [samples, T] are token ids in [0, classes), kept as integers.
#include <cstdint>
#include <string>
#include <vector>

#include "mpiddp/data/dataset.hpp"
#include "mpiddp/data/element_type.hpp"
#include "mpiddp/data/input_file.hpp"

namespace mpiddp::data {

struct NpyConfig {
  std::string features;  // path of the [samples, ...] feature array
  std::string targets;   // path of the [samples] or [samples, outputs] target array
  Index classes = 0;     // > 0: targets are class labels in [0, classes); 0: regression
  bool token_ids = false;  // features are token ids in [0, classes), not values
};

struct NpyHeader {
  Encoding encoding;
  std::vector<uint64_t> shape;  // empty for a 0-d array
  uint64_t data_offset = 0;     // where the elements start
  uint64_t elements = 1;        // product of shape, overflow-checked
};

// Reads and validates the header: magic, version, header length (bounded), dtype (one of
// the five above, little-endian), C order, a shape whose byte size does not overflow and
// exactly matches the file's size. A DataError names the file and the problem.
NpyHeader read_npy_header(const InputFile& file);

template <typename T>
Dataset<T> load_npy(const NpyConfig& config);

}  // namespace mpiddp::data
