// The fixed-point sum of deterministic mode (distributed/exact_sum.hpp), on one process:
// the grid, the exactness where a float sum loses digits, order independence, non-finite
// groups. The MPI side (the same bits at every world size) is tests/cli/deterministic*.sh.
#include "mpiddp/distributed/exact_sum.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "mpiddp/distributed/local_communicator.hpp"

namespace mpiddp::distributed {
namespace {

uint64_t bits(double x) {
  uint64_t b = 0;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

TEST(FixedPoint, ShiftLeavesHeadroomForTheTerms) {
  // max 1.0 = 0.5 * 2^1: e = 1; 24 terms: h = 5 (32 >= 24); s = 62 - 5 - 1 = 56.
  EXPECT_EQ(kernels::fixed_point_shift(1.0, 24), 56);
  // max 0.75: e = 0; 1 term: h = 0; s = 62.
  EXPECT_EQ(kernels::fixed_point_shift(0.75, 1), 62);
  // max 1e16 < 2^54 (2^53 = 9.007e15 <= 1e16): e = 54; 3 terms: h = 2; s = 6.
  EXPECT_EQ(kernels::fixed_point_shift(1e16, 3), 6);
  // The largest value times 2^s stays within 2^(62-h), so 2^h of them fit in an int64.
  const int s = kernels::fixed_point_shift(0.999999, 4096);
  EXPECT_LE(std::fabs(static_cast<double>(kernels::to_fixed(0.999999, s))), std::ldexp(1.0, 62 - 12));
  EXPECT_EQ(kernels::from_fixed(kernels::to_fixed(0.375, 10), 10), 0.375);
  EXPECT_EQ(kernels::to_fixed(2.5, 0), 2);   // ties to even
  EXPECT_EQ(kernels::to_fixed(-3.5, 0), -4);
  // A denormal-sized group: the shift stops at 1000, where 2^shift is still finite.
  EXPECT_EQ(kernels::fixed_point_shift(1e-300, 24), 1000);
}

// add_to_grid against to_fixed, value by value: the same integers for every value whose
// rounded magnitude stays below 2^62, whatever its exponent (subnormals included), sign or
// rounding (ties go to even). Enough values that the vector loop and its tail both run.
// Both forms: add_to_grid (AVX-512DQ's conversion in a build that has it, with the loop of
// bits on the tail) and the loop of bits alone, the portable build's.
template <typename V>
void expect_grid_matches_rounding(int shift, const std::vector<V>& values) {
  std::vector<int64_t> sums(values.size(), 5), by_bits(values.size(), 5);  // they add: start off zero
  kernels::add_to_grid(values.data(), values.size(), shift, sums.data());
  kernels::add_to_grid_by_bits(values.data(), values.size(), shift, by_bits.data());
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t expected = 5 + kernels::to_fixed(static_cast<double>(values[i]), shift);
    ASSERT_EQ(sums[i], expected) << "value " << values[i] << " (" << i << ") at shift " << shift;
    ASSERT_EQ(by_bits[i], expected) << "by bits: value " << values[i] << " (" << i << ") at shift " << shift;
  }
}

template <typename V>
std::vector<V> values_across_exponents(uint32_t seed, double largest) {
  std::vector<V> values;
  uint64_t state = seed;
  auto next = [&] { state = state * 6364136223846793005ull + 1442695040888963407ull; return state >> 11; };
  for (int i = 0; i < 1001; ++i) {
    const double unit = static_cast<double>(next()) / 9007199254740992.0;     // [0, 1)
    const int exponent = -static_cast<int>(next() % (std::is_same_v<V, float> ? 160 : 1100));
    const double v = largest * unit * std::ldexp(1.0, exponent);
    values.push_back(static_cast<V>(i % 2 ? -v : v));
  }
  for (V v : {V(0), V(-0.0), V(0.5), V(0.75), V(-0.75), V(0.25), V(0.375), V(-0.125),
              std::numeric_limits<V>::denorm_min(), -std::numeric_limits<V>::denorm_min(),
              std::numeric_limits<V>::min(), static_cast<V>(largest), static_cast<V>(-largest)})
    if (std::fabs(static_cast<double>(v)) <= largest) values.push_back(v);  // on the grid's range
  return values;
}

TEST(FixedPoint, AddToGridRoundsEachValueAsToFixed) {
  for (double largest : {0.75, 1.0, 3e-3, 2.5e5, 1e-30}) {
    for (int64_t terms : {int64_t{1}, int64_t{24}, int64_t{4096}}) {
      const int shift = kernels::fixed_point_shift(largest, terms);
      expect_grid_matches_rounding(shift, values_across_exponents<float>(7, largest));
      expect_grid_matches_rounding(shift, values_across_exponents<double>(11, largest));
    }
  }
  // Shifts that put ties and halves on the grid's last bit, and a shift of 0.
  for (int shift : {0, 1, 2, 23, 52, 60})
    expect_grid_matches_rounding(shift, std::vector<double>{0.5, 1.5, 2.5, 3.5, -0.5, -1.5, 0.75, 0.25,
                                                            std::ldexp(1.0, -shift - 1), std::ldexp(3.0, -shift - 1)});
  // A shift of 1000 (a group of values near 2^-1000) and a negative one (values near 2^100).
  expect_grid_matches_rounding(1000, values_across_exponents<double>(3, 1e-300));
  expect_grid_matches_rounding(kernels::fixed_point_shift(1e30, 8), values_across_exponents<float>(5, 1e30));
}

TEST(ExactSum, AddsWhatAFloatSumLoses) {
  LocalCommunicator one;
  ExactSum sum(one, {0}, 1, ReduceAlgorithm::kMpi);
  // In double, (1e16 + 1) - 1e16 = 0 (1e16 + 1 rounds to 1e16); the exact sum is 1.
  const double terms[3] = {1e16, 1.0, -1e16};
  EXPECT_EQ((terms[0] + terms[1]) + terms[2], 0.0);
  double out = 0.0;
  sum.sum(terms, 3, 3, 1.0, &out);
  EXPECT_EQ(out, 1.0);
  sum.sum(terms, 3, 3, 2.0, &out);  // the divisor applies once, after the sum
  EXPECT_EQ(out, 0.5);
}

TEST(ExactSum, AnyOrderGivesTheSameBits) {
  LocalCommunicator one;
  // Two groups: a tensor of 2 values and a "loss" of 1, 5 terms of width 3.
  ExactSum sum(one, {0, 2}, 3, ReduceAlgorithm::kMpi);
  std::vector<double> terms = {0.1, -3e-9, 2.5, 0.2, 7e-9, 1.25, 0.3, 1e-9, 0.125,
                               1e-17, -2e-9, 3.5, -0.7, 4e-9, 0.0625};
  std::vector<double> reversed;
  for (int t = 4; t >= 0; --t) reversed.insert(reversed.end(), terms.begin() + 3 * t, terms.begin() + 3 * t + 3);
  double a[3], b[3];
  sum.sum(terms.data(), 5, 5, 5.0, a);
  sum.sum(reversed.data(), 5, 5, 5.0, b);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bits(a[i]), bits(b[i])) << i;
  // The loss group holds exact binary fractions: (2.5+1.25+0.125+3.5+0.0625)/5 = 7.4375/5.
  EXPECT_EQ(a[2], 7.4375 / 5.0);
  // The first tensor's sum, 0.1+0.2+0.3+1e-17-0.7 = -0.1 to the grid's 2^-59 (max 0.7: e = 0,
  // h = 3, s = 59), far inside float64's rounding of the same sum.
  EXPECT_NEAR(a[0], -0.1 / 5.0, 1e-16);
}

TEST(ExactSum, NonFiniteGroupIsNanAndTheOthersStayExact) {
  LocalCommunicator one;
  ExactSum sum(one, {0, 1}, 2, ReduceAlgorithm::kMpi);
  const double terms[4] = {1.0, std::numeric_limits<double>::infinity(), 2.0, 1.0};
  double out[2];
  sum.sum(terms, 2, 2, 1.0, out);
  EXPECT_EQ(out[0], 3.0);
  EXPECT_TRUE(std::isnan(out[1]));
  // An all-zero group sums to 0, and no rank's terms at all is a sum of nothing.
  const double zeros[2] = {0.0, 0.0};
  sum.sum(zeros, 1, 1, 1.0, out);
  EXPECT_EQ(out[0], 0.0);
  sum.sum(static_cast<const double*>(nullptr), 0, 1, 1.0, out);
  EXPECT_EQ(out[1], 0.0);
}

}  // namespace
}  // namespace mpiddp::distributed
