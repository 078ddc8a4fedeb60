#include "mpiddp/optim/gradient_clip.hpp"

#include <cmath>

#include "mpiddp/core/finite.hpp"
#include "mpiddp/kernels/fixed_point.hpp"

namespace mpiddp::optim {

// Note [the norm on a grid]
// A floating-point sum of squares depends on how the values are cut and in which order they
// are added, and with the optimizer sharded across the world each rank holds only its part
// of the averaged gradient. So each square g^2, computed in double (exact for a float32
// gradient), is rounded once onto the fixed-point grid that the largest |g| of the whole
// gradient sets, for `whole` terms (Note [the fixed-point sum] in distributed/exact_sum.hpp);
// the int64 sums add exactly in any grouping, and the total turns back into a double once.
// The grid keeps 62 - log2(P) bits below the largest square: what falls below it changes
// the norm by far less than float32's own rounding of it (PyTorch's norm is float32). The
// parts need two combined scalars: the largest |g|, then the sum.
template <typename T>
double gradient_norm(const T* values, Index count, Index whole, distributed::PartExchange& parts) {
  const double largest = parts.largest_of_gradient_parts(largest_magnitude(values, static_cast<size_t>(count)));
  if (largest == 0.0) return 0.0;
  // A square past the double range (a float64 gradient above 1.3e154), or a non-finite value:
  // the norm is that infinity or NaN, as PyTorch's. Its coefficient is 0 (infinity) or 1 (NaN:
  // not below 1), but such a step never applies: the step guard skips a non-finite step first.
  if (!std::isfinite(largest * largest)) return largest * largest;
  const int shift = kernels::fixed_point_shift(largest * largest, whole);
  const int64_t sum = kernels::sum_of_squares_on_grid(values, static_cast<size_t>(count), shift);
  return std::sqrt(kernels::from_fixed(parts.sum_of_gradient_parts(sum), shift));
}

template <typename T>
T clip_coefficient(double norm, double max_norm) {
  // PyTorch divides a Python number by the 0-d norm tensor: the tensor's reciprocal times
  // the number, in the gradients' type; clamped to 1, which multiplies nothing (g * 1 is g).
  const T coefficient = (T(1) / (static_cast<T>(norm) + static_cast<T>(1e-6))) * static_cast<T>(max_norm);
  return coefficient < T(1) ? coefficient : T(1);
}

template double gradient_norm<float>(const float*, Index, Index, distributed::PartExchange&);
template double gradient_norm<double>(const double*, Index, Index, distributed::PartExchange&);
template float clip_coefficient<float>(double, double);
template double clip_coefficient<double>(double, double);

}  // namespace mpiddp::optim
