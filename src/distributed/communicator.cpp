#include "mpiddp/distributed/communicator.hpp"

namespace mpiddp::distributed {

void Communicator::sum_fixed_point(int64_t* sums, size_t count, const kernels::FixedPointGroups& groups, void* out,
                                   ElementType out_type, ReduceAlgorithm algorithm) {
  wait_sum(start_sum(sums, count, ElementType::kInt64, 1.0, algorithm, Compression::kNone));
  if (out_type == ElementType::kFloat32)
    kernels::fixed_point_to_values(sums, 0, count, groups, static_cast<float*>(out));
  else
    kernels::fixed_point_to_values(sums, 0, count, groups, static_cast<double*>(out));
}

}  // namespace mpiddp::distributed
