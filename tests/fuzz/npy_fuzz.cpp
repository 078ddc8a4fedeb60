// Fuzz target: a .npy file, as features and as targets. Anything but a DataError or a
// ConfigError (another exception, a crash, an ASan or UBSan finding, a huge allocation) is a
// finding.
#include <cstddef>
#include <cstdint>

#include "mpiddp/core/error.hpp"
#include "mpiddp/data/npy.hpp"
#include "temp_input.hpp"

using namespace mpiddp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_temp_input(data, size, ".npy");
  try {
    data::read_npy_header(data::InputFile(path));
  } catch (const DataError&) {
  }
  // The same file as features and as regression targets, then as class labels.
  for (const Index classes : {Index{0}, Index{3}}) {
    try {
      data::load_npy<float>({path, path, classes});
    } catch (const Error& e) {
      if (e.code() != kExitData && e.code() != kExitConfig) throw;
    }
  }
  return 0;
}
