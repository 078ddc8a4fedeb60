// The fixed-point sum of deterministic mode (distributed/exact_sum.hpp), on one process:
// the grid, the exactness where a float sum loses digits, order independence, non-finite
// groups. The MPI side (the same bits at every world size) is tests/cli/deterministic*.sh.
#include "mpiddp/distributed/exact_sum.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
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
  EXPECT_EQ(fixed_point_shift(1.0, 24), 56);
  // max 0.75: e = 0; 1 term: h = 0; s = 62.
  EXPECT_EQ(fixed_point_shift(0.75, 1), 62);
  // max 1e16 < 2^54 (2^53 = 9.007e15 <= 1e16): e = 54; 3 terms: h = 2; s = 6.
  EXPECT_EQ(fixed_point_shift(1e16, 3), 6);
  // The largest value times 2^s stays within 2^(62-h), so 2^h of them fit in an int64.
  const int s = fixed_point_shift(0.999999, 4096);
  EXPECT_LE(std::fabs(static_cast<double>(to_fixed(0.999999, s))), std::ldexp(1.0, 62 - 12));
  EXPECT_EQ(from_fixed(to_fixed(0.375, 10), 10), 0.375);
  EXPECT_EQ(to_fixed(2.5, 0), 2);   // ties to even
  EXPECT_EQ(to_fixed(-3.5, 0), -4);
  // A denormal-sized group: the shift stops at 1000, where 2^shift is still finite.
  EXPECT_EQ(fixed_point_shift(1e-300, 24), 1000);
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
