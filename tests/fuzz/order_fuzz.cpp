// Fuzz target: a sampler.order file (a .npy int64 array [epochs, samples]), loaded as the
// trainer loads it, for a training set of 4 samples over 2 epochs and of 3 samples over 1.
// Anything but a DataError (another exception, a crash, an ASan or UBSan finding, a huge
// allocation) is a finding.
#include <cstddef>
#include <cstdint>

#include "mpiddp/core/error.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/data/sample_order.hpp"
#include "temp_input.hpp"

using namespace mpiddp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_temp_input(data, size, ".npy");
  distributed::LocalCommunicator comm;
  for (const auto& [samples, epochs] : {std::pair<Index, int64_t>{4, 2}, {3, 1}}) {
    try {
      const data::SampleOrder order = data::load_sample_order(comm, path, samples, epochs);
      // Every replayed index must be a valid sample: the validation's whole point.
      for (int64_t e = 0; e < epochs; ++e)
        for (const Index i : order.epoch(e))
          if (i < 0 || i >= samples) __builtin_trap();
    } catch (const Error& e) {
      if (e.code() != kExitData) throw;
    }
  }
  return 0;
}
