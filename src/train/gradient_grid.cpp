#include "mpiddp/train/gradient_grid.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "mpiddp/kernels/fixed_point.hpp"

// Note [gradients onto the grid]
// The fixed-point sum (Note [the fixed-point sum] in distributed/exact_sum.hpp) takes its
// grid from the largest value of a group over every chunk on every rank, so every chunk's
// gradients must exist before the first one is converted: L copies of the P gradients per
// rank, written by backward, read for the maxima and read again to convert. At mlp's 1.9 M
// parameters that was about 180 MB of memory traffic per rank and step, more than the
// products. The grid does not need the largest value, only a bound on it that every rank
// computes alike: a chunk's gradient of a linear weight sums B/C products x[f,s] dy[o,s], so
// it is at most (B/C) max|x| max|dy| (twice that, for float rounding), with max|x| and
// max|dy| the maxima over every rank (one MPI_MAX of two doubles per layer during backward).
// The maxima over the global batch are the same at every N, so the grid is too, and each
// chunk's gradients can be converted as soon as its product leaves them in cache, straight
// into int64 sums. The bound costs bits: where it exceeds the largest value by 2^k, each
// value keeps k bits fewer than the max-based grid would give (62 - h - k for the largest).
// Measured on the mlp and fmnist benchmarks (16 chunks, every 40th step, every tensor), k
// was 2.4 to 5.4, so the largest keeps over 52 bits and a float32 gradient keeps its 24
// down to 2^-28 of its tensor's largest (docs/benchmarks.md).
// A non-finite x or dy makes its bound infinite on every rank, and the tensor comes out NaN;
// so does a bound above the dtype's largest value, where a chunk's product may have overflowed.

namespace mpiddp::train {

template <typename T>
ChunkGradientGrid<T>::ChunkGradientGrid(distributed::Communicator& comm, std::vector<size_t> tensor_bounds,
                                        int64_t chunks, int64_t* shared_sums)
    : comm_(comm), begins_(std::move(tensor_bounds)), chunks_(chunks) {
  assert(begins_.size() >= 2 && begins_.front() == 0);
  const size_t groups = begins_.size() - 1;
  if (!shared_sums) own_sums_.assign(begins_.back(), 0);
  sums_ = shared_sums ? shared_sums : own_sums_.data();
  shift_.assign(groups, 0);
  finite_.assign(groups, 1);
  placed_.assign(groups, 0);
}

template <typename T>
void ChunkGradientGrid<T>::begin_step(const T* views) {
  views_ = views;  // no clearing of the sums: each layer's first chunk sets them
  std::fill(placed_.begin(), placed_.end(), char{0});
  local_finite_ = true;
}

template <typename T>
void ChunkGradientGrid<T>::max_over_ranks(double* values, size_t count) {
  for (size_t i = 0; i < count; ++i) local_finite_ = local_finite_ && std::isfinite(values[i]);
  comm_.allreduce_max(values, count);
}

template <typename T>
kernels::GradientGrid::Tensor ChunkGradientGrid<T>::tensor(const void* view, double bound) {
  const auto offset = static_cast<size_t>(static_cast<const T*>(view) - views_);
  const auto at = std::lower_bound(begins_.begin(), begins_.end() - 1, offset);
  if (at == begins_.end() - 1 || *at != offset)
    throw std::logic_error("ChunkGradientGrid: a gradient view that starts no tensor");
  const size_t g = static_cast<size_t>(at - begins_.begin());
  // Above T's largest value a chunk's gradient may have overflowed to an infinity, which no
  // grid holds: the tensor is non-finite, on every rank alike (the bound is every rank's).
  const bool finite = std::isfinite(bound) && bound <= static_cast<double>(std::numeric_limits<T>::max());
  if (!finite) local_finite_ = false;
  finite_[g] = finite ? 1 : 0;
  shift_[g] = finite && bound > 0.0 ? kernels::fixed_point_shift(bound, chunks_) : 0;
  placed_[g] = 1;
  return {sums_ + offset, shift_[g], finite};
}

template <typename T>
template <typename V>
void ChunkGradientGrid<T>::put(const V* values, size_t count, const Tensor& tensor, size_t at, bool first) {
  int64_t* sums = tensor.sums + at;
  if (tensor.finite)
    kernels::add_to_grid(values, count, tensor.shift, sums,
                             first ? kernels::OntoGrid::kSet : kernels::OntoGrid::kAdd);
  else if (first)
    std::fill_n(sums, count, int64_t{0});  // summed all the same: last step's sums could overflow
}

template <typename T>
void ChunkGradientGrid<T>::add(const float* values, size_t count, const Tensor& tensor, size_t at, bool first) {
  put(values, count, tensor, at, first);
}

template <typename T>
void ChunkGradientGrid<T>::add(const double* values, size_t count, const Tensor& tensor, size_t at, bool first) {
  put(values, count, tensor, at, first);
}

template <typename T>
void* ChunkGradientGrid<T>::scratch(size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);  // in the first step only
  return scratch_.data();
}

template <typename T>
void ChunkGradientGrid<T>::check_every_tensor_placed() const {
  if (!std::all_of(placed_.begin(), placed_.end(), [](char placed) { return placed != 0; }))
    throw std::logic_error("ChunkGradientGrid: a tensor's layer put nothing onto the grid");
}

template <typename T>
kernels::FixedPointGroups ChunkGradientGrid<T>::groups(double divisor) const {
  return {begins_.data(), shift_.size(), shift_.data(), finite_.data(), divisor};
}

template <typename T>
void ChunkGradientGrid<T>::finish(double divisor, T* gradients, distributed::ReduceAlgorithm algorithm) {
  check_every_tensor_placed();
  comm_.sum_fixed_point(sums_, begins_.back(), groups(divisor), gradients, distributed::element_type_of<T>(),
                        algorithm);
}

template <typename T>
void ChunkGradientGrid<T>::finish_part(double divisor, T* gradients, size_t begin, size_t end,
                                       distributed::ReduceAlgorithm algorithm) {
  check_every_tensor_placed();
  comm_.wait_sum(comm_.start_sum(sums_, begins_.back(), distributed::ElementType::kInt64, 1.0, algorithm,
                                 distributed::Compression::kNone));
  // Each value by the one conversion every path uses (fixed_point_to_values): the bits finish gives it.
  kernels::fixed_point_to_values(sums_ + begin, begin, end - begin, groups(divisor), gradients + begin);
}

template class ChunkGradientGrid<float>;
template class ChunkGradientGrid<double>;

}  // namespace mpiddp::train
