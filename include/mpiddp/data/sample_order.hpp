#pragma once
// sampler.order: another framework's data order, replayed. Row e of the .npy int64 array
// [epochs, samples] is the global sample order of epoch e (0-based); the sampler splits it
// across ranks exactly as it splits its own permutation (data/sampler.hpp).
#include <cstdint>
#include <string>
#include <vector>

#include "mpiddp/core/types.hpp"
#include "mpiddp/distributed/communicator.hpp"

namespace mpiddp::data {

class SampleOrder {
 public:
  // values: rows x columns int64, row-major, read from `path`. Validates one column per
  // sample, at least `epochs` rows and every value in [0, samples); rows may be
  // permutations or any indices in range. A DataError names the file, and the row and
  // column of a bad value.
  SampleOrder(const std::vector<int64_t>& values, int64_t rows, int64_t columns,
              const std::string& path, Index samples, int64_t epochs);
  // The global order of epoch `epoch` (0-based).
  const std::vector<Index>& epoch(int64_t epoch) const { return rows_[static_cast<size_t>(epoch)]; }

 private:
  std::vector<std::vector<Index>> rows_;  // (rows, samples)
};

// Rank 0 reads the .npy file (data/npy.hpp) and broadcasts it; every rank validates it.
SampleOrder load_sample_order(distributed::Communicator& comm, const std::string& path, Index samples,
                              int64_t epochs);

}  // namespace mpiddp::data
