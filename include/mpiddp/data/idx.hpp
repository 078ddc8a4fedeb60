#pragma once
// The IDX format of MNIST and Fashion-MNIST, plain or gzip-compressed (detected from the
// first bytes, not the name). A file is: two zero bytes, a type byte, the number of
// dimensions, each dimension as a big-endian uint32, then the big-endian elements.
//
// As a data source: an images file [samples, ...] (flattened to features, each value
// multiplied by `scale`) and a labels file [samples] of class labels in [0, classes).
// IDX elements are bytes or big-endian numbers, never the training dtype as stored, so
// they are converted once at load time, streamed through a small buffer.
#include <cstdint>
#include <string>
#include <vector>

#include "mpiddp/data/dataset.hpp"
#include "mpiddp/data/element_type.hpp"
#include "mpiddp/data/input_file.hpp"

namespace mpiddp::data {

struct IdxConfig {
  std::string images;  // path of the [samples, rows, cols] (or [samples, ...]) file
  std::string labels;  // path of the [samples] label file
  Index classes = 10;
  double scale = 1.0 / 255.0;  // pixels 0..255 -> [0, 1]
};

struct IdxHeader {
  Encoding encoding;            // big-endian
  std::vector<uint64_t> dims;
  uint64_t elements = 1;        // product of dims, overflow-checked
};

// Reads and validates the header from the start of `source`: magic, type, at most 8
// dimensions, and a data size that overflows nothing and fits what the source can hold.
IdxHeader read_idx_header(ByteSource& source);

template <typename T>
Dataset<T> load_idx(const IdxConfig& config);

}  // namespace mpiddp::data
