#include "mpiddp/core/finite.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace mpiddp {
namespace {

template <typename T>
class AllFinite : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(AllFinite, Scalars);

TYPED_TEST(AllFinite, FindsOneBadValueAnywhere) {
  using T = TypeParam;
  // 1003 values: not a multiple of any vector width, so the tail loop is covered too.
  std::vector<T> x(1003);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>(i) - T(500);
  // The largest finite value counts as finite: x * 0 must not overflow.
  x[7] = std::numeric_limits<T>::max();
  x[8] = -std::numeric_limits<T>::max();
  x[9] = std::numeric_limits<T>::denorm_min();
  EXPECT_TRUE(all_finite(x.data(), static_cast<Index>(x.size())));
  const T bad[3] = {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                    -std::numeric_limits<T>::infinity()};
  for (const T b : bad)
    for (const size_t at : {size_t{0}, size_t{511}, x.size() - 1}) {
      const T saved = x[at];
      x[at] = b;
      EXPECT_FALSE(all_finite(x.data(), static_cast<Index>(x.size()))) << b << " at " << at;
      x[at] = saved;
    }
  EXPECT_TRUE(all_finite(x.data(), 0));  // nothing to be wrong
}

TEST(LargestMagnitude, OfTheBits) {
  const std::vector<float> values = {0.5f, -0.0f, -3.25f, 2.0f, 1e-40f, 3.0f};
  EXPECT_EQ(largest_magnitude(values.data(), values.size()), 3.25);
  EXPECT_EQ(largest_magnitude(values.data(), 0), 0.0);
  const std::vector<double> tiny = {-std::numeric_limits<double>::denorm_min(), 0.0};
  EXPECT_EQ(largest_magnitude(tiny.data(), 2), std::numeric_limits<double>::denorm_min());
  for (double bad : {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::quiet_NaN()}) {
    std::vector<double> with = {1.0, bad, 2.0};
    EXPECT_EQ(largest_magnitude(with.data(), 3), std::numeric_limits<double>::infinity()) << bad;
    const std::vector<float> as_float = {1.0f, static_cast<float>(bad)};
    EXPECT_EQ(largest_magnitude(as_float.data(), 2), std::numeric_limits<double>::infinity()) << bad;
  }
}

}  // namespace
}  // namespace mpiddp
