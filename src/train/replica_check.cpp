#include "mpiddp/train/replica_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "mpiddp/core/hash.hpp"

namespace mpiddp::train {

template <typename T>
ReplicaReport check_replicas(distributed::Communicator& comm, const T* params, Index count, T* scratch,
                             Index scratch_count) {
  if (count > 0 && scratch_count < 1)
    throw std::invalid_argument("check_replicas: the scratch must hold at least one value, not " +
                                std::to_string(scratch_count));
  ReplicaReport report;
  const auto bytes = static_cast<size_t>(count) * sizeof(T);
  const auto checksums = comm.allgather(fnv1a(params, bytes));
  report.checksum = hex64(checksums[0]);
  for (size_t r = 1; r < checksums.size(); ++r)
    if (checksums[r] != checksums[0]) report.differing_ranks.push_back(static_cast<int>(r));
  if (!report.differing_ranks.empty()) report.first_differing_rank = report.differing_ranks[0];

  // The checksum says whether; the difference says how far: both are worth reporting.
  const Index piece = scratch_count;
  double max_diff = 0.0;
  for (Index first = 0; first < count; first += piece) {
    const Index n = std::min(piece, count - first);
    const auto piece_bytes = static_cast<size_t>(n) * sizeof(T);
    if (comm.rank() == 0) std::memcpy(scratch, params + first, piece_bytes);
    comm.broadcast(scratch, piece_bytes, 0);
    for (Index i = 0; i < n; ++i) {
      const double d =
          std::fabs(static_cast<double>(params[first + i]) - static_cast<double>(scratch[i]));
      if (!(d <= max_diff)) max_diff = d;  // also catches NaN
    }
  }
  comm.allreduce_max(&max_diff, 1);
  report.max_diff = max_diff;
  report.identical = report.first_differing_rank < 0 && max_diff == 0.0;
  return report;
}

template ReplicaReport check_replicas<float>(distributed::Communicator&, const float*, Index, float*, Index);
template ReplicaReport check_replicas<double>(distributed::Communicator&, const double*, Index, double*,
                                              Index);

}  // namespace mpiddp::train
