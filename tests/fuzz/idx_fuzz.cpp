// Fuzz target: an IDX file, plain or gzip-compressed (the reader decides from the first
// bytes), as images and as labels. Anything but a DataError or a ConfigError is a finding.
#include <cstddef>
#include <cstdint>

#include "mpiddp/core/error.hpp"
#include "mpiddp/data/idx.hpp"
#include "temp_input.hpp"

using namespace mpiddp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_temp_input(data, size, ".idx");
  try {
    data::InputFile file(path);
    data::read_idx_header(*data::open_byte_source(file));
  } catch (const DataError&) {
  }
  for (const Index classes : {Index{10}, Index{256}}) {
    try {
      data::load_idx<float>({path, path, classes, 1.0 / 255.0});
    } catch (const Error& e) {
      if (e.code() != kExitData && e.code() != kExitConfig) throw;
    }
  }
  return 0;
}
