#include "mpiddp/train/replica_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
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
  // Values with the same bits differ by 0, so replicas identical down to an infinity or a NaN
  // are identical (inf - inf would be NaN). A differing value where either side is NaN has no
  // distance: it is counted apart and reported as NaN, which MPI's maximum could not carry.
  const Index piece = scratch_count;
  double worst[2] = {0.0, 0.0};  // the largest finite or infinite difference; 1 if any was NaN
  for (Index first = 0; first < count; first += piece) {
    const Index n = std::min(piece, count - first);
    const auto piece_bytes = static_cast<size_t>(n) * sizeof(T);
    if (comm.rank() == 0) std::memcpy(scratch, params + first, piece_bytes);
    comm.broadcast(scratch, piece_bytes, 0);
    for (Index i = 0; i < n; ++i) {
      if (std::memcmp(&params[first + i], &scratch[i], sizeof(T)) == 0) continue;
      const double d =
          std::fabs(static_cast<double>(params[first + i]) - static_cast<double>(scratch[i]));
      if (std::isnan(d)) worst[1] = 1.0;
      else worst[0] = std::max(worst[0], d);
    }
  }
  comm.allreduce_max(worst, 2);
  report.max_diff = worst[1] != 0.0 ? std::numeric_limits<double>::quiet_NaN() : worst[0];
  report.identical = report.first_differing_rank < 0 && worst[0] == 0.0 && worst[1] == 0.0;
  return report;
}

template <typename T>
void broadcast_buffers(distributed::Communicator& comm, nn::Model<T>& model) {
  if (model.buffer_value_count() > 0)
    comm.broadcast(model.buffer_values(), static_cast<size_t>(model.buffer_value_count()) * sizeof(T), 0);
  if (model.buffer_counter_count() > 0)
    comm.broadcast(model.buffer_counters(),
                   static_cast<size_t>(model.buffer_counter_count()) * sizeof(int64_t), 0);
}

template void broadcast_buffers(distributed::Communicator&, nn::Model<float>&);
template void broadcast_buffers(distributed::Communicator&, nn::Model<double>&);
template ReplicaReport check_replicas<float>(distributed::Communicator&, const float*, Index, float*, Index);
template ReplicaReport check_replicas<double>(distributed::Communicator&, const double*, Index, double*,
                                              Index);

}  // namespace mpiddp::train
