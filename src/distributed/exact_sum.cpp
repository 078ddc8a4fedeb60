#include "mpiddp/distributed/exact_sum.hpp"

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cmath>

#include "mpiddp/core/finite.hpp"

namespace mpiddp::distributed {

ExactSum::ExactSum(Communicator& comm, std::vector<size_t> group_begins, size_t width,
                   ReduceAlgorithm algorithm)
    : comm_(comm), groups_(std::move(group_begins)), width_(width), algorithm_(algorithm) {
  assert(!groups_.empty() && groups_.front() == 0 && groups_.back() < width);
  groups_.push_back(width);
  max_.assign(groups_.size() - 1, 0.0);
  shift_.assign(groups_.size() - 1, 0);
  finite_.assign(groups_.size() - 1, 1);
  fixed_.assign(width, 0);
}

template <typename V>
void ExactSum::sum(const V* terms, Index local_terms, int64_t max_terms, double divisor,
                   double* out) {
  const size_t groups = groups_.size() - 1;
  // 1. Each group's largest magnitude over every rank's terms. A non-finite value makes it
  //    +inf: MPI_MAX of NaN is not defined, of +inf it is.
  for (size_t g = 0; g < groups; ++g) {
    double m = 0.0;
    for (Index t = 0; t < local_terms; ++t)
      m = std::max(m, largest_magnitude(terms + static_cast<size_t>(t) * width_ + groups_[g],
                                        groups_[g + 1] - groups_[g]));
    max_[g] = m;
  }
  local_terms_finite_ = std::all_of(max_.begin(), max_.end(), [](double m) { return std::isfinite(m); });
  comm_.allreduce_max(max_.data(), groups);
  // 2. Every value onto its group's grid, this rank's terms added in int64 (exact), then
  //    the int64 sum over the ranks (exact, on the configured path). In blocks of values,
  //    so that a block's int64 sums stay in cache while every term is added to them.
  constexpr size_t kBlock = 512;
  for (size_t g = 0; g < groups; ++g) {
    shift_[g] = std::isfinite(max_[g]) && max_[g] > 0.0 ? kernels::fixed_point_shift(max_[g], max_terms) : 0;
    const bool finite = std::isfinite(max_[g]);  // a non-finite group comes out as NaN below
    finite_[g] = finite ? 1 : 0;
    for (size_t begin = groups_[g]; begin < groups_[g + 1]; begin += kBlock) {
      const size_t end = std::min(begin + kBlock, groups_[g + 1]);
      std::fill(fixed_.begin() + static_cast<std::ptrdiff_t>(begin),
                fixed_.begin() + static_cast<std::ptrdiff_t>(end), int64_t{0});
      if (!finite) continue;
      for (Index t = 0; t < local_terms; ++t)
        kernels::add_to_grid(terms + static_cast<size_t>(t) * width_ + begin, end - begin, shift_[g],
                    fixed_.data() + begin);
    }
  }
  // 3. Summed over the ranks and back to double, once per value, by the conversion of every
  //    path: the same integers give the same bits everywhere.
  const kernels::FixedPointGroups grids{groups_.data(), groups, shift_.data(), finite_.data(), divisor};
  comm_.sum_fixed_point(fixed_.data(), width_, grids, out, ElementType::kFloat64, algorithm_);
}

template void ExactSum::sum(const float*, Index, int64_t, double, double*);
template void ExactSum::sum(const double*, Index, int64_t, double, double*);

}  // namespace mpiddp::distributed
