#pragma once
// sampler.order: another framework's data order, replayed. Row e of the .npy int64 array
// [epochs, samples] is the global sample order of epoch e (0-based); the sampler splits it
// across ranks exactly as it splits its own permutation (data/sampler.hpp).
#include <cstdint>
#include <string>
#include <vector>

#include "mpiddp/core/types.hpp"
#include "mpiddp/dist/communicator.hpp"

namespace mpiddp::train {

class SampleOrder {
 public:
  // Validates the parsed file: two dimensions, one row per sample index, at least `epochs`
  // rows, every value in [0, samples). Rows may be permutations or any indices in range.
  // Throws DataError naming the file, and the row and column of a bad value.
  SampleOrder(const std::vector<char>& npy_bytes, const std::string& path, Index samples,
              int64_t epochs);
  // The global order of epoch `epoch` (0-based).
  const std::vector<Index>& epoch(int64_t epoch) const { return rows_[static_cast<size_t>(epoch)]; }

 private:
  std::vector<std::vector<Index>> rows_;  // (epochs in the file, samples)
};

// Rank 0 reads the file; every rank validates the same bytes.
SampleOrder load_sample_order(dist::Communicator& comm, const std::string& path, Index samples,
                              int64_t epochs);

}  // namespace mpiddp::train
