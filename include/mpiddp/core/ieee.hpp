#pragma once
// The IEEE 754 layout of float and double: sign, biased exponent, mantissa (without its
// leading 1). For loops that work on a value's bits so that they vectorise as integer code
// (largest_magnitude in core/finite.hpp, the fixed-point conversion in kernels/fixed_point.cpp).
#include <cstdint>

namespace mpiddp {

template <typename V>
struct Ieee;
template <>
struct Ieee<float> {
  using Bits = uint32_t;
  static constexpr int kMantissaBits = 23, kBias = 127;
};
template <>
struct Ieee<double> {
  using Bits = uint64_t;
  static constexpr int kMantissaBits = 52, kBias = 1023;
};

}  // namespace mpiddp
