#pragma once
// The grid of the fixed-point sum (Note [the fixed-point sum] in exact_sum.hpp): the shift a
// group's largest value sets, the rounding of one value onto it and back, and the loop over a
// whole group that puts every chunk's gradients onto it (the group's largest magnitude is
// mpiddp::largest_magnitude, core/finite.hpp).
#include <cmath>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif
#include <cstddef>
#include <cstdint>

#include "mpiddp/kernels/isa.hpp"

namespace mpiddp::kernels {

// The grid for a group whose values are at most max_abs in magnitude (> 0, finite) and
// whose sum has at most `terms` terms.
int fixed_point_shift(double max_abs, int64_t terms);
double from_fixed(int64_t value, int shift);

// 2^shift as a double, for shift in the range fixed_point_shift gives.
inline double power_of_two(int shift) { return std::ldexp(1.0, shift); }

// A sum on the grid back to a value and divided once: sum * 2^-shift is exact (unscale =
// power_of_two(-shift)), the division the one rounding. The same integers give the same bits.
inline double from_fixed_divided(int64_t sum, double unscale, double divisor) {
  return static_cast<double>(sum) * unscale / divisor;
}

// How sums on several grids turn back into values: group g holds indices [begins[g],
// begins[g + 1]) on the grid of shifts[g], and a non-finite group (finite[g] == 0) comes out
// NaN; every value is divided by `divisor`.
struct FixedPointGroups {
  const size_t* begins = nullptr;  // (groups + 1), ascending
  size_t groups = 0;
  const int* shifts = nullptr;   // (groups)
  const char* finite = nullptr;  // (groups)
  double divisor = 1.0;
};

// out[k] = from_fixed_divided(sums[k], ...) as T for k < count, sums[k] being element
// first + k, converted by that element's group: the one conversion of every path (each gives
// the same integers, so the same bits).
template <typename T>
void fixed_point_to_values(const int64_t* sums, size_t first, size_t count, const FixedPointGroups& groups, T* out);

// value * 2^shift rounded to an integer, one value at a time (add_to_grid is the loop):
// |value * 2^shift| must be below 2^63. Multiplying by a power of two is exact.
inline int64_t to_fixed(double value, int shift) {
  const double scaled = value * power_of_two(shift);
#if defined(__x86_64__)
  // cvtsd2si: round to nearest, ties to even (the default MXCSR mode), as llrint, in one
  // instruction of baseline x86-64; llrint is a libm call.
  return _mm_cvtsd_si64(_mm_set_sd(scaled));
#else
  return static_cast<int64_t>(std::llrint(scaled));
#endif
}

// kAdd: sums[i] += to_fixed(values[i], shift); kSet: sums[i] = to_fixed(values[i], shift),
// for the first of a sum's terms, so that no pass has to clear the sums first.
enum class OntoGrid { kAdd, kSet };

// For `count` finite values whose magnitudes times 2^shift stay below 2^62 (what
// fixed_point_shift guarantees for its group): the same integers as to_fixed, by AVX-512DQ's
// vector conversion where the CPU has it, else by add_to_grid_by_bits at the CPU's width.
template <typename V>
void add_to_grid(const V* values, size_t count, int shift, int64_t* sums, OntoGrid how = OntoGrid::kAdd);
// The same integers, computed from the bits so that the loop vectorises on any x86-64
// (there is no vector conversion from double to int64 below AVX-512): the portable build's form.
template <typename V>
void add_to_grid_by_bits(const V* values, size_t count, int shift, int64_t* sums, OntoGrid how = OntoGrid::kAdd);

// sum over i of to_fixed(values[i] * values[i], shift), the squares in double (exact for float
// values), for finite values whose squares times 2^shift stay below 2^62 / count (gradient
// clipping's norm, Note [the norm on a grid] in optim/gradient_clip.cpp). The integers add
// exactly in any order, so every level gives the same sum: AVX-512DQ converts eight at once.
template <typename V>
int64_t sum_of_squares_on_grid(const V* values, size_t count, int shift);

// The variants add_to_grid chooses from (portable, AVX2, AVX-512), for tests that run each level.
template <typename V>
using AddToGridKernel = void (*)(const V*, size_t, int, int64_t*, OntoGrid);
template <typename V>
const Dispatched<AddToGridKernel<V>>& add_to_grid_variants();

}  // namespace mpiddp::kernels
