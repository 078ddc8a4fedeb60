// The grid product (Note [the grid product] in src/kernels/grid_product.cpp): a linear layer's
// weight gradient, chunk by chunk, onto the int64 grid in one kernel. It must give exactly
// the integers of the reference below (each chunk's value a chain of multiply-adds from zero
// in sample order, rounded as to_fixed rounds), at every size with row and column tails, at
// both of its scales, and the same integers however the chunks are split between calls.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "mpiddp/core/memory.hpp"
#include "mpiddp/kernels/fixed_point.hpp"
#include "mpiddp/kernels/grid_product.hpp"

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

std::vector<int64_t> by_kernel(const Operands& p, int shift) {
  const size_t bytes = grid_product_scratch_bytes(p.f, p.o, p.chunk * p.chunks);
  std::vector<std::byte, HugePageAllocator<std::byte>> scratch(bytes);
  Sums sums(static_cast<size_t>(p.f * p.o), -1);  // overwritten, not added to
  grid_product(p.x.data(), p.f, p.dy.data(), p.o, p.chunk, p.chunks, shift, sums.data(), false,
               reinterpret_cast<float*>(scratch.data()));
  return {sums.begin(), sums.end()};
}

TEST(GridProduct, GivesTheIntegersOfEachChunksMultiplyAddChainAtEverySize) {
  if (!grid_product_available()) GTEST_SKIP() << "this build has no grid product (needs AVX-512 F and DQ)";
  // Row tails inside the first and the second vector, column tails of 1 to 3, one chunk,
  // and more columns than a band (64), on whole lines of the sums.
  const Index sizes[][4] = {{37, 7, 8, 3}, {32, 4, 16, 2},  {45, 10, 4, 5},
                            {3, 1, 1, 1},  {80, 13, 16, 8}, {64, 131, 8, 3}};
  for (const auto& size : sizes) {
    const Operands p = make_operands(size[0], size[1], size[2], size[3], 1.0f, 7);
    EXPECT_EQ(by_kernel(p, 40), reference(p, 40)) << size[0] << " x " << size[1] << ", chunks " << size[3];
  }
}

TEST(GridProduct, ConvertsInDoubleWhere2ToTheShiftIsNoFloat) {
  if (!grid_product_available()) GTEST_SKIP() << "this build has no grid product (needs AVX-512 F and DQ)";
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

TEST(GridProduct, TheChunksSplitBetweenCallsGiveTheSameSums) {
  if (!grid_product_available()) GTEST_SKIP() << "this build has no grid product (needs AVX-512 F and DQ)";
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

}  // namespace
}  // namespace mpiddp::kernels
