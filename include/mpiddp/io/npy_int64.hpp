#pragma once
// A minimal, strict reader of NumPy .npy files holding one little-endian int64 array in C
// order (descr '<i8'), header versions 1-3. It exists for sampler.order; the general
// dataset readers live with the data sources.
#include <cstdint>
#include <string>
#include <vector>

namespace mpiddp::io {

struct Int64Array {
  std::vector<int64_t> shape;
  std::vector<int64_t> values;  // prod(shape) values, row-major
};

// Parses a whole .npy file's bytes; `name` is used in messages. Throws DataError naming
// the file and the problem (bad magic, other dtype, Fortran order, truncated data, ...).
Int64Array parse_npy_int64(const std::vector<char>& bytes, const std::string& name);

}  // namespace mpiddp::io
