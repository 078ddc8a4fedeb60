#include "mpiddp/core/finite.hpp"

#include <bit>
#include <cmath>
#include <limits>

#include "mpiddp/core/ieee.hpp"

namespace mpiddp {

template <typename V>
double largest_magnitude(const V* values, size_t count) {
  using Bits = typename Ieee<V>::Bits;
  // A non-negative IEEE value's bits, read as an unsigned integer, order as its magnitude
  // does, and an infinity's or a NaN's lie above every finite value's: the largest |v| is the
  // largest of the bits without the sign, a loop of integer maxima that vectorises.
  constexpr Bits kMagnitude = std::numeric_limits<Bits>::max() >> 1;
  Bits largest = 0;
  for (size_t i = 0; i < count; ++i) {
    const Bits magnitude = std::bit_cast<Bits>(values[i]) & kMagnitude;
    largest = magnitude > largest ? magnitude : largest;
  }
  const V value = std::bit_cast<V>(largest);
  return std::isfinite(value) ? static_cast<double>(value) : std::numeric_limits<double>::infinity();
}

template double largest_magnitude(const float*, size_t);
template double largest_magnitude(const double*, size_t);

}  // namespace mpiddp
