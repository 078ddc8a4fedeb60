#pragma once
// sampler.order fixtures: an int64 .npy array, written with the data readers' fixture writer.
#include <cstdint>
#include <string>
#include <vector>

#include "../data/fixture_files.hpp"

namespace mpiddp::test {

// numpy.save(path, numpy.array(values, dtype=numpy.int64).reshape(shape))
inline void write_order(const std::string& path, const std::vector<int64_t>& shape,
                        const std::vector<int64_t>& values) {
  std::string dims;  // "(4, 256)", or "(1024,)" as Python writes a 1-tuple
  for (size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dims += ",";
  data::testing::write_file(path, data::testing::npy_bytes("<i8", "(" + dims + ")",
                                                           data::testing::bytes_of(values)));
}

}  // namespace mpiddp::test
