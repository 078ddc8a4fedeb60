#include "mpiddp/kernels/fixed_point.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <type_traits>

#include <immintrin.h>

#include "mpiddp/core/ieee.hpp"
#include "targets.hpp"

namespace mpiddp::kernels {

int fixed_point_shift(double max_abs, int64_t terms) {
  int e = 0;
  std::frexp(max_abs, &e);  // max_abs = f 2^e, 0.5 <= f < 1: max_abs < 2^e
  int h = 0;
  while ((int64_t{1} << h) < terms) ++h;
  // At most 1000, so that 2^shift is a finite double: a group whose largest value is below
  // 2^-938 (gradients that small are zeros in effect) keeps only what lies above 2^-1000.
  return std::min(62 - h - e, 1000);
}

double from_fixed(int64_t value, int shift) { return static_cast<double>(value) * power_of_two(-shift); }

namespace {

// The same integers as to_fixed, computed from the bits so that the loop vectorises on any
// x86-64 (there is no vector conversion from double to int64 below AVX-512). Inlined into each
// level's variant, so that it vectorises at that level's width.
template <typename V>
MPIDDP_ALWAYS_INLINE void add_to_grid_by_bits_body(const V* values, size_t count, int shift, int64_t* sums,
                                                   OntoGrid how) {
  using Bits = typename Ieee<V>::Bits;
  constexpr int kMantissaBits = Ieee<V>::kMantissaBits;
  constexpr int kSignBit = static_cast<int>(sizeof(Bits)) * 8 - 1;
  constexpr Bits kMantissa = (Bits{1} << kMantissaBits) - 1;
  constexpr Bits kExponent = (Bits{1} << (kSignBit - kMantissaBits)) - 1;
  // A finite v is m 2^(E - bias - mantissa bits), with m the mantissa and its leading 1
  // (none for a subnormal, whose E is 0 but counts as 1); so v 2^shift = m 2^k, k = max(E, 1) + offset.
  const int64_t offset = int64_t{shift} - Ieee<V>::kBias - kMantissaBits;
  // All in 64-bit lanes, the shift counts unsigned like the values they shift: the form
  // GCC vectorises (variable shifts of 64-bit lanes are AVX2's vpsllvq and vpsrlvq).
  for (size_t i = 0; i < count; ++i) {
    const uint64_t bits = std::bit_cast<Bits>(values[i]);
    const uint64_t biased = (bits >> kMantissaBits) & kExponent;
    const uint64_t m = (bits & kMantissa) | (biased != 0 ? uint64_t{1} << kMantissaBits : uint64_t{0});
    const int64_t k = static_cast<int64_t>(biased != 0 ? biased : 1) + offset;
    // k >= 0: m 2^k is an integer, below 2^62 by the caller's bound.
    const uint64_t up = m << static_cast<uint64_t>(std::clamp<int64_t>(k, 0, 63));
    // k < 0: m / 2^r rounded to nearest, ties to even, as cvtsd2si and llrint round: the
    // quotient goes up when the half bit (r - 1) is set and either a bit below it is set or
    // the quotient is odd. From r = 63 on, m < 2^53 rounds to 0, as for every larger r.
    const uint64_t r = static_cast<uint64_t>(std::clamp<int64_t>(-k, 1, 63));
    const uint64_t quotient = m >> r;
    const uint64_t half = (m >> (r - 1)) & 1;
    const uint64_t below_half = ((m << (64 - r)) << 1) != 0 ? 1 : 0;  // bits 0 .. r-2
    const uint64_t down = quotient + (half & (below_half | (quotient & 1)));
    const uint64_t magnitude = k >= 0 ? up : down;
    const uint64_t negative = bits >> kSignBit;  // 0 or 1
    // Two's complement negation when negative: (x xor all ones) + 1.
    const auto fixed = static_cast<int64_t>((magnitude ^ (uint64_t{0} - negative)) + negative);
    sums[i] = how == OntoGrid::kSet ? fixed : sums[i] + fixed;
  }
}

template <typename V>
void add_to_grid_portable(const V* values, size_t count, int shift, int64_t* sums, OntoGrid how) {
  add_to_grid_by_bits_body(values, count, shift, sums, how);
}

template <typename V>
MPIDDP_TARGET_AVX2 void add_to_grid_avx2(const V* values, size_t count, int shift, int64_t* sums, OntoGrid how) {
  add_to_grid_by_bits_body(values, count, shift, sums, how);
}

// Eight values as doubles (floats widen exactly).
template <typename V>
MPIDDP_TARGET_AVX512 MPIDDP_ALWAYS_INLINE __m512d eight_as_doubles(const V* values) {
  if constexpr (std::is_same_v<V, float>)
    return _mm512_cvtps_pd(_mm256_loadu_ps(values));
  else
    return _mm512_loadu_pd(values);
}

// AVX-512DQ converts eight doubles to int64 in one instruction (vcvtpd2qq), rounding as
// to_fixed's cvtsd2si does (to nearest, ties to even: the MXCSR mode), and v 2^shift is
// exact in double: the same integers as the loop of bits, in a fraction of its instructions.
template <typename V>
MPIDDP_TARGET_AVX512 void add_to_grid_avx512(const V* values, size_t count, int shift, int64_t* sums, OntoGrid how) {
  const __m512d scale = _mm512_set1_pd(power_of_two(shift));
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m512i fixed = _mm512_cvtpd_epi64(_mm512_mul_pd(eight_as_doubles(values + i), scale));
    _mm512_storeu_si512(sums + i, how == OntoGrid::kSet ? fixed : _mm512_add_epi64(_mm512_loadu_si512(sums + i), fixed));
  }
  add_to_grid_by_bits_body(values + i, count - i, shift, sums + i, how);
}

template <typename V>
MPIDDP_ALWAYS_INLINE int64_t sum_of_squares_body(const V* values, size_t count, int shift) {
  int64_t sum = 0;
  for (size_t i = 0; i < count; ++i) {
    const double value = static_cast<double>(values[i]);
    sum += to_fixed(value * value, shift);
  }
  return sum;
}

template <typename V>
int64_t sum_of_squares_portable(const V* values, size_t count, int shift) {
  return sum_of_squares_body(values, count, shift);
}

// Eight squares at a time, each scaled and converted as to_fixed does (add_to_grid_avx512),
// into eight int64 partial sums: integer additions, exact in any order.
template <typename V>
MPIDDP_TARGET_AVX512 int64_t sum_of_squares_avx512(const V* values, size_t count, int shift) {
  const __m512d scale = _mm512_set1_pd(power_of_two(shift));
  __m512i sums = _mm512_setzero_si512();
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m512d v = eight_as_doubles(values + i);
    sums = _mm512_add_epi64(sums, _mm512_cvtpd_epi64(_mm512_mul_pd(_mm512_mul_pd(v, v), scale)));
  }
  // Added lane by lane: GCC 12's _mm512_reduce_add_epi64 warns of an uninitialised operand.
  alignas(64) int64_t lanes[8];
  _mm512_store_si512(lanes, sums);
  int64_t sum = sum_of_squares_body(values + i, count - i, shift);
  for (const int64_t lane : lanes) sum += lane;
  return sum;
}

}  // namespace

template <typename V>
int64_t sum_of_squares_on_grid(const V* values, size_t count, int shift) {
  using Kernel = int64_t (*)(const V*, size_t, int);
  // No vector conversion to int64 below AVX-512: the scalar loop at the lower levels.
  static const Dispatched<Kernel> variants(
      {sum_of_squares_portable<V>, nullptr, sum_of_squares_avx512<V>, nullptr, nullptr});
  return variants()(values, count, shift);
}

template <typename V>
const Dispatched<AddToGridKernel<V>>& add_to_grid_variants() {
  static const Dispatched<AddToGridKernel<V>> variants(
      {add_to_grid_portable<V>, add_to_grid_avx2<V>, add_to_grid_avx512<V>, nullptr, nullptr});
  return variants;
}

template <typename V>
void add_to_grid_by_bits(const V* values, size_t count, int shift, int64_t* sums, OntoGrid how) {
  add_to_grid_portable(values, count, shift, sums, how);
}

template <typename V>
void add_to_grid(const V* values, size_t count, int shift, int64_t* sums, OntoGrid how) {
  add_to_grid_variants<V>()()(values, count, shift, sums, how);
}

namespace {

template <typename T>
MPIDDP_ALWAYS_INLINE void to_values_body(const int64_t* sums, size_t first, size_t count, const FixedPointGroups& groups,
                                         T* out) {
  const size_t* ends = groups.begins + 1;
  const size_t last = first + count;
  size_t g = static_cast<size_t>(std::upper_bound(ends, ends + groups.groups, first) - ends);
  for (size_t i = first; i < last; ++g) {
    const size_t end = std::min(last, ends[g]);
    T* to = out + (i - first);
    T* to_end = out + (end - first);
    if (!groups.finite[g]) {
      std::fill(to, to_end, std::numeric_limits<T>::quiet_NaN());
    } else {
      // Branch-free, so that it vectorises (int64 -> double, the scale, the division): with
      // the finiteness test inside, it ran a value at a time, 6 % of a deterministic mlp step.
      const double unscale = power_of_two(-groups.shifts[g]), divisor = groups.divisor;
      const int64_t* from = sums + (i - first);
      for (; to != to_end; ++to, ++from) *to = static_cast<T>(from_fixed_divided(*from, unscale, divisor));
    }
    i = end;
  }
}

// int64 to double is one instruction with AVX-512DQ (vcvtqq2pd) and a few without; correctly
// rounded either way, so every level gives the same values.
MPIDDP_VARIANTS_OF(to_values, to_values_body, void,
                   (const int64_t* sums, size_t first, size_t count, const FixedPointGroups& groups, T* out),
                   (sums, first, count, groups, out))

}  // namespace

template <typename T>
void fixed_point_to_values(const int64_t* sums, size_t first, size_t count, const FixedPointGroups& groups, T* out) {
  using Kernel = void (*)(const int64_t*, size_t, size_t, const FixedPointGroups&, T*);
  static const Dispatched<Kernel> variants({to_values_portable<T>, to_values_avx2<T>, to_values_avx512<T>, nullptr, nullptr});
  variants()(sums, first, count, groups, out);
}

template void fixed_point_to_values(const int64_t*, size_t, size_t, const FixedPointGroups&, float*);
template void fixed_point_to_values(const int64_t*, size_t, size_t, const FixedPointGroups&, double*);
template int64_t sum_of_squares_on_grid(const float*, size_t, int);
template int64_t sum_of_squares_on_grid(const double*, size_t, int);
template void add_to_grid(const float*, size_t, int, int64_t*, OntoGrid);
template void add_to_grid(const double*, size_t, int, int64_t*, OntoGrid);
template void add_to_grid_by_bits(const float*, size_t, int, int64_t*, OntoGrid);
template void add_to_grid_by_bits(const double*, size_t, int, int64_t*, OntoGrid);
template const Dispatched<AddToGridKernel<float>>& add_to_grid_variants();
template const Dispatched<AddToGridKernel<double>>& add_to_grid_variants();

}  // namespace mpiddp::kernels
