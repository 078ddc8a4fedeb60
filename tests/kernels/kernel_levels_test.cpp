// Every dispatched kernel besides the grid product (tests/kernels/grid_product_test.cpp), at
// every instruction-set level the CPU has, against a scalar reference written out here: the
// grid's conversion, the conversion back to values, clipping's sum of squares on the grid, and
// the reduction's sums. Sizes give the
// vector loops and their tails, and starts one element past an aligned address.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "../../src/distributed/sum_kernels.hpp"
#include "../support/isa_levels.hpp"
#include "mpiddp/kernels/fixed_point.hpp"

namespace mpiddp::kernels {
namespace {

class KernelLevels : public testing::EveryIsaLevel {};
MPIDDP_INSTANTIATE_AT_EVERY_LEVEL(KernelLevels);

// Values across many exponents, both signs, ties at the grid's resolution (k + 1/2 at shift
// 0), zeros and subnormals: every value below 1 in magnitude.
template <typename V>
std::vector<V> grid_values(size_t count, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::vector<V> values;
  for (size_t i = 0; i < count; ++i) values.push_back(static_cast<V>(std::ldexp(unit(rng), -static_cast<int>(i % 40))));
  const V specials[] = {V(0), V(-0.0), V(0.5), V(-0.5), V(0.25), std::numeric_limits<V>::denorm_min(),
                        -std::numeric_limits<V>::min()};
  for (size_t i = 0; i < sizeof specials / sizeof specials[0] && i < count; ++i) values[i * 3 % count] = specials[i];
  return values;
}

template <typename V>
void expect_add_to_grid_as_to_fixed() {
  for (size_t count : {size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{31}, size_t{1003}}) {
    for (size_t start : {size_t{0}, size_t{1}}) {
      for (int shift : {0, 3, 40, 61, 140}) {
        // Values below 2^(61 - shift) in magnitude: on the grid's range (|v 2^shift| < 2^62).
        std::vector<V> all = grid_values<V>(count + start, 21);
        for (V& v : all) v = static_cast<V>(std::ldexp(static_cast<double>(v), std::min(0, 60 - shift)));
        std::vector<int64_t> sums(count + start, 5), set(count + start, 5);
        add_to_grid(all.data() + start, count, shift, sums.data() + start);                     // adds
        add_to_grid(all.data() + start, count, shift, set.data() + start, OntoGrid::kSet);      // sets
        for (size_t i = 0; i < count; ++i) {
          const int64_t expected = to_fixed(static_cast<double>(all[start + i]), shift);
          ASSERT_EQ(sums[start + i], 5 + expected) << "value " << all[start + i] << " shift " << shift;
          ASSERT_EQ(set[start + i], expected) << "value " << all[start + i] << " shift " << shift;
        }
        if (start == 1) {
          EXPECT_EQ(sums[0], 5);  // nothing before the start
        }
      }
    }
  }
}

TEST_P(KernelLevels, AddToGridRoundsEveryValueAsToFixed) {
  expect_add_to_grid_as_to_fixed<float>();
  expect_add_to_grid_as_to_fixed<double>();
}

// Gradient clipping's sum of squares (optim/gradient_clip.cpp): the scalar loop's integers at
// every level, on the grid clipping picks for the values' largest square.
template <typename V>
void expect_sum_of_squares_as_the_loop() {
  for (size_t count : {size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{31}, size_t{1003}}) {
    for (size_t start : {size_t{0}, size_t{1}}) {
      for (double largest : {1.0, 3e-4, 70.0}) {
        std::vector<V> all = grid_values<V>(count + start, 33);
        for (V& v : all) v = static_cast<V>(static_cast<double>(v) * largest);
        const V* values = all.data() + start;
        double top = 0.0;
        for (size_t i = 0; i < count; ++i) top = std::max(top, std::fabs(static_cast<double>(values[i])));
        const int shift = fixed_point_shift(top * top, static_cast<int64_t>(count));
        int64_t expected = 0;
        for (size_t i = 0; i < count; ++i)
          expected += to_fixed(static_cast<double>(values[i]) * static_cast<double>(values[i]), shift);
        ASSERT_EQ(sum_of_squares_on_grid(values, count, shift), expected) << count << " values up to " << top;
      }
    }
  }
  // By hand: (1.5 2^-3)^2 2^7 = 2.25 2^1 = 4.5, a tie, to even: 4; (2.5 2^-3)^2 2^7 = 12.5: 12;
  // 0.75^2 2^7 = 72 exactly. Nine values, so that the AVX-512 loop meets all three.
  const V by_hand[] = {V(1.5 / 8), V(2.5 / 8), V(0.75), V(0), V(0), V(0), V(0), V(0), V(-1.5 / 8)};
  EXPECT_EQ(sum_of_squares_on_grid(by_hand, 9, 7), 4 + 12 + 72 + 4);
}

TEST_P(KernelLevels, SumOfSquaresOnTheGridIsTheScalarLoops) {
  expect_sum_of_squares_as_the_loop<float>();
  expect_sum_of_squares_as_the_loop<double>();
}

template <typename T>
void expect_values_as_the_formula() {
  // Two groups on two grids and a non-finite third, over 2 x 37 + 5 sums; converted from
  // element `first` on, a start inside the first group.
  const size_t begins[] = {0, 37, 74, 79};
  const int shifts[] = {20, 45, 0};
  const char finite[] = {1, 1, 0};
  const FixedPointGroups groups{begins, 3, shifts, finite, 3.0};
  std::mt19937_64 rng(5);
  std::vector<int64_t> sums(79);
  for (int64_t& s : sums) s = static_cast<int64_t>(rng() >> 3) - (int64_t{1} << 59);
  for (size_t first : {size_t{0}, size_t{1}, size_t{36}}) {
    const size_t count = 79 - first;
    std::vector<T> out(count);
    fixed_point_to_values(sums.data() + first, first, count, groups, out.data());
    for (size_t k = 0; k < count; ++k) {
      const size_t i = first + k;
      const size_t g = i < 37 ? 0 : i < 74 ? 1 : 2;
      if (g == 2) {
        ASSERT_TRUE(std::isnan(out[k]));
        continue;
      }
      const T expected = static_cast<T>(static_cast<double>(sums[i]) * std::ldexp(1.0, -shifts[g]) / 3.0);
      ASSERT_EQ(out[k], expected) << "element " << i;
    }
  }
}

TEST_P(KernelLevels, FixedPointToValuesIsTheFormulaInEveryGroup) {
  expect_values_as_the_formula<float>();
  expect_values_as_the_formula<double>();
}

template <typename T>
void expect_sums_in_rank_order(distributed::ElementType type) {
  // Three ranks' buffers of 5000 (more than one block of 2048, and a tail), summed over
  // [1, 4999) (starts off a block boundary and off alignment), scaled by 1/3, into two outputs.
  const size_t n = 5000, first = 1, last = 4999;
  std::mt19937_64 rng(9);
  std::vector<std::vector<T>> in(3, std::vector<T>(n));
  for (auto& rank : in)
    for (T& v : rank) v = std::is_integral_v<T> ? static_cast<T>(rng() % 1000) : static_cast<T>(std::ldexp(static_cast<double>(rng() >> 11), -53));
  const void* inputs[] = {in[0].data(), in[1].data(), in[2].data()};
  std::vector<T> a(n, T(7)), b(n, T(7));
  void* outs[] = {a.data(), b.data()};
  const double scale = std::is_integral_v<T> ? 1.0 : 1.0 / 3.0;
  EXPECT_TRUE(distributed::sum_slice_into_every(outs, 2, inputs, 3, first, last, type, scale));
  for (size_t i = 0; i < n; ++i) {
    T expected = T(7);
    if (i >= first && i < last) {
      T s = in[0][i];
      s += in[1][i];
      s += in[2][i];
      expected = s * static_cast<T>(scale);
    }
    ASSERT_EQ(a[i], expected) << "element " << i;
    ASSERT_EQ(b[i], expected) << "element " << i;
  }
  // Scaling in place, and its finiteness check: an infinity among the values is found.
  std::vector<T> scaled = in[0];
  if constexpr (!std::is_integral_v<T>) {
    EXPECT_EQ(distributed::scale_in_place(scaled.data(), n, type, 0.25), distributed::SumsFinite::kFinite);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(scaled[i], in[0][i] * T(0.25));
    scaled[4321] = std::numeric_limits<T>::infinity();
    EXPECT_EQ(distributed::scale_in_place(scaled.data(), n, type, 0.5), distributed::SumsFinite::kNotFinite);
  }
}

TEST_P(KernelLevels, SumsAddTheRanksInOrderAndScaleOnce) {
  expect_sums_in_rank_order<float>(distributed::ElementType::kFloat32);
  expect_sums_in_rank_order<double>(distributed::ElementType::kFloat64);
  expect_sums_in_rank_order<int64_t>(distributed::ElementType::kInt64);
}

TEST_P(KernelLevels, FixedSumsConvertEveryElementByItsGroup) {
  const size_t n = 3000;
  std::vector<int64_t> r0(n), r1(n);
  for (size_t i = 0; i < n; ++i) {
    r0[i] = static_cast<int64_t>(i * 977) - 1000000;
    r1[i] = static_cast<int64_t>(i * i);
  }
  const size_t begins[] = {0, 1500, 3000};
  const int shifts[] = {10, 30};
  const char finite[] = {1, 1};
  const FixedPointGroups groups{begins, 2, shifts, finite, 2.0};
  const void* inputs[] = {r0.data(), r1.data()};
  std::vector<double> out(n, -1.0);
  void* outs[] = {out.data()};
  distributed::sum_fixed_slice_into_every(outs, 1, distributed::ElementType::kFloat64, inputs, 2, 3, n, groups);
  EXPECT_EQ(out[2], -1.0);
  for (size_t i = 3; i < n; ++i)
    ASSERT_EQ(out[i], static_cast<double>(r0[i] + r1[i]) * std::ldexp(1.0, -shifts[i < 1500 ? 0 : 1]) / 2.0) << i;
}

}  // namespace
}  // namespace mpiddp::kernels
