// The grid product (Note [the grid product] in src/kernels/grid_product.cpp): a linear layer's
// weight gradient, chunk by chunk, onto the int64 grid in one kernel. At every instruction-set
// level it must give exactly the integers of the reference below (each chunk's value a chain
// of multiply-adds from zero in sample order, rounded as to_fixed rounds), at every size with
// row and column tails, from unaligned operands, at both of its scales, and the same integers
// however the chunks are split between calls.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "mpiddp/core/memory.hpp"
#include "mpiddp/kernels/fixed_point.hpp"
#include "mpiddp/kernels/grid_product.hpp"
#include "../support/isa_levels.hpp"

namespace mpiddp::kernels {
namespace {

struct Operands {
  Index f, o, chunk, chunks;
  std::vector<float> x, dy;  // (f, samples), (o, samples)
};

Operands make_operands(Index f, Index o, Index chunk, Index chunks, float scale, unsigned seed) {
  Operands p{f, o, chunk, chunks, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  for (Index i = 0; i < f * chunk * chunks; ++i) p.x.push_back(normal(rng));
  for (Index i = 0; i < o * chunk * chunks; ++i) p.dy.push_back(normal(rng));
  return p;
}

// The definition, one value at a time.
std::vector<int64_t> reference(const Operands& p, int shift) {
  std::vector<int64_t> sums(static_cast<size_t>(p.f * p.o), 0);
  for (Index j = 0; j < p.o; ++j)
    for (Index i = 0; i < p.f; ++i)
      for (Index t = 0; t < p.chunks; ++t) {
        float value = 0.0f;
        for (Index s = t * p.chunk; s < (t + 1) * p.chunk; ++s)
          value = std::fma(p.x[static_cast<size_t>(s * p.f + i)], p.dy[static_cast<size_t>(s * p.o + j)], value);
        sums[static_cast<size_t>(i + j * p.f)] += kernels::to_fixed(value, shift);
      }
  return sums;
}

// The sums as the trainer's grid holds them: 64-byte aligned, so that with f a multiple of 8
// every tile's whole lines take the non-temporal stores.
using Sums = std::vector<int64_t, HugePageAllocator<int64_t>>;

class GridProduct : public testing::EveryIsaLevel {};
MPIDDP_INSTANTIATE_AT_EVERY_LEVEL(GridProduct);

std::vector<int64_t> by_kernel(const Operands& p, int shift) {
  const size_t bytes = grid_product_scratch_bytes(p.f, p.o, p.chunk * p.chunks);
  std::vector<std::byte, HugePageAllocator<std::byte>> scratch(bytes);
  Sums sums(static_cast<size_t>(p.f * p.o), -1);  // overwritten, not added to
  grid_product(p.x.data(), p.f, p.dy.data(), p.o, p.chunk, p.chunks, shift, sums.data(), false,
               reinterpret_cast<float*>(scratch.data()));
  return {sums.begin(), sums.end()};
}

TEST_P(GridProduct, GivesTheIntegersOfEachChunksMultiplyAddChainAtEverySize) {
  // Row tails inside the first and the second vector, column tails of 1 to 3, one chunk,
  // and more columns than a band (64), on whole lines of the sums.
  const Index sizes[][4] = {{37, 7, 8, 3}, {32, 4, 16, 2},  {45, 10, 4, 5},
                            {3, 1, 1, 1},  {80, 13, 16, 8}, {64, 131, 8, 3}};
  for (const auto& size : sizes) {
    const Operands p = make_operands(size[0], size[1], size[2], size[3], 1.0f, 7);
    EXPECT_EQ(by_kernel(p, 40), reference(p, 40)) << size[0] << " x " << size[1] << ", chunks " << size[3];
  }
}

TEST_P(GridProduct, ConvertsInDoubleWhere2ToTheShiftIsNoFloat) {
  // Values about 2^-40, chunk values about 2^-78: their grid's shift, 135, is above
  // float's largest exponent (127), so 2^shift is no float.
  const Operands tiny = make_operands(37, 7, 8, 3, std::ldexp(1.0f, -40), 8);
  const std::vector<int64_t> expected = reference(tiny, 135);
  ASSERT_GT(std::abs(expected[0]), int64_t{1} << 50);  // in range, and far from rounding to 0
  EXPECT_EQ(by_kernel(tiny, 135), expected);
  // Below -126 the same: there every value of a float (below 2^128) rounds to 0.
  const Operands huge = make_operands(37, 7, 8, 3, std::ldexp(1.0f, 50), 9);
  EXPECT_EQ(by_kernel(huge, -130), std::vector<int64_t>(37 * 7, 0));
}

TEST_P(GridProduct, TheChunksSplitBetweenCallsGiveTheSameSums) {
  // What N changes: how many of the chunks one rank's call holds. Calls of 1 and 3 chunks
  // (the second adding) give the sums of one call of 4.
  const Operands all = make_operands(45, 10, 8, 4, 1.0f, 11);
  const std::vector<int64_t> whole = by_kernel(all, 38);
  std::vector<std::byte, HugePageAllocator<std::byte>> scratch(grid_product_scratch_bytes(45, 10, 32));
  Sums split(whole.size(), 0);
  const Index first = 8 * 45, first_dy = 8 * 10;  // one chunk of samples
  float* packed = reinterpret_cast<float*>(scratch.data());
  grid_product(all.x.data(), 45, all.dy.data(), 10, 8, 1, 38, split.data(), false, packed);
  grid_product(all.x.data() + first, 45, all.dy.data() + first_dy, 10, 8, 3, 38, split.data(), true, packed);
  EXPECT_EQ(std::vector<int64_t>(split.begin(), split.end()), whole);
}

TEST_P(GridProduct, RoundsValuesFarBelowTheGridsTopToNearest) {
  // Rows of x scaled down by 2^0 .. 2^-44: at shift 40 their chunk values are v 2^40 from about
  // 2^40 down to 2^-4, so many are no integers and the rounding (to nearest, ties to even)
  // decides them. Scales hit exact halves too: 0.5 x 1 at shift 0 is a tie.
  Operands p = make_operands(45, 9, 4, 3, 1.0f, 14);
  for (Index s = 0; s < 12; ++s)
    for (Index i = 0; i < 45; ++i) p.x[static_cast<size_t>(s * 45 + i)] *= std::ldexp(1.0f, -static_cast<int>(i % 45));
  const std::vector<int64_t> expected = reference(p, 40);
  size_t fractional = 0;  // chunk values whose rounding mattered, counted in the reference's terms
  for (int64_t v : expected) fractional += std::abs(v) < 64 ? 1 : 0;
  ASSERT_GT(fractional, size_t{20});
  EXPECT_EQ(by_kernel(p, 40), expected);
  Operands ties = make_operands(16, 4, 1, 2, 1.0f, 15);
  for (float& v : ties.x) v = 0.5f;
  for (float& v : ties.dy) v = 1.0f;
  ties.dy[1] = 3.0f;  // 1.5: rounds up to 2; 0.5 rounds down to 0
  EXPECT_EQ(by_kernel(ties, 0), reference(ties, 0));
}

TEST_P(GridProduct, UnalignedOperandsAndSumsGiveTheSameIntegers) {
  // Every operand and the sums one element past an aligned start: the loads and the stores
  // of the sums (no whole 64-byte line) take their unaligned forms.
  const Operands p = make_operands(37, 6, 8, 2, 1.0f, 12);
  std::vector<float> x(p.x.size() + 1), dy(p.dy.size() + 1);
  std::copy(p.x.begin(), p.x.end(), x.begin() + 1);
  std::copy(p.dy.begin(), p.dy.end(), dy.begin() + 1);
  std::vector<std::byte, HugePageAllocator<std::byte>> scratch(grid_product_scratch_bytes(37, 6, 16) + 64);
  Sums sums(37 * 6 + 1, -1);
  grid_product(x.data() + 1, 37, dy.data() + 1, 6, 8, 2, 40, sums.data() + 1, false,
               reinterpret_cast<float*>(scratch.data() + 4));
  EXPECT_EQ(std::vector<int64_t>(sums.begin() + 1, sums.end()), reference(p, 40));
  EXPECT_EQ(sums[0], -1);  // nothing written before the start
}

TEST_P(GridProduct, EveryLevelHasAVariantUpToAvx512) {
  // The variants themselves, not the dispatch: each of the levels up to AVX-512 has its own.
  const Dispatched<GridProductKernel>& variants = grid_product_variants();
  EXPECT_TRUE(variants.has(Isa::kBaseline) && variants.has(Isa::kAvx2) && variants.has(Isa::kAvx512));
  const Operands p = make_operands(19, 5, 4, 3, 1.0f, 13);
  std::vector<std::byte, HugePageAllocator<std::byte>> scratch(grid_product_scratch_bytes(19, 5, 12));
  Sums sums(19 * 5, 0);
  variants.at(level())(p.x.data(), 19, p.dy.data(), 5, 4, 3, 30, sums.data(), false,
                       reinterpret_cast<float*>(scratch.data()));
  EXPECT_EQ(std::vector<int64_t>(sums.begin(), sums.end()), reference(p, 30));
}

}  // namespace
}  // namespace mpiddp::kernels
