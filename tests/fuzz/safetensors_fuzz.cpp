// Fuzz target: a safetensors file (the format of weights, exports and checkpoints), parsed
// and every tensor read in both dtypes. Anything but an mpiddp::Error with the code given
// (another exception, a crash, an ASan or UBSan finding, a huge allocation) is a finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "mpiddp/core/error.hpp"
#include "mpiddp/io/safetensors.hpp"

using namespace mpiddp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const io::SafetensorsFile file(std::vector<char>(data, data + size), "fuzz.safetensors",
                                   kExitCheckpoint);
    std::vector<float> f;
    std::vector<double> d;
    for (const auto& tensor : file.tensors()) {
      // elements() is bounded by the data section's size once the file has parsed.
      f.resize(static_cast<size_t>(tensor.elements()));
      d.resize(static_cast<size_t>(tensor.elements()));
      file.read(tensor, f.data());
      file.read(tensor, d.data());
    }
  } catch (const Error& e) {
    if (e.code() != kExitCheckpoint) throw;
  }
  return 0;
}
