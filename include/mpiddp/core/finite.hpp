#pragma once
// Fast tests for NaN and Inf in a flat buffer, and its largest magnitude.
#include <Eigen/Core>

#include <cstddef>

#include "mpiddp/core/types.hpp"

namespace mpiddp {

// True when every one of the n values is finite. x * 0 is 0 for a finite x and NaN for NaN
// and +-Inf, so the sum of x * 0 is 0 exactly when all are finite. The order of the sum
// cannot change that answer, which lets Eigen vectorise it: one pass at memory speed.
template <typename T>
bool all_finite(const T* x, Index n) {
  using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
  return (Eigen::Map<const Array>(x, n) * T(0)).sum() == T(0);
}

// The largest |values[i]| of `count` floats or doubles, as a double; +infinity when one of
// them is an infinity or a NaN (a bound computed from it must see them).
template <typename V>
double largest_magnitude(const V* values, size_t count);

}  // namespace mpiddp
