// bfloat16 rounding and the compressed sum's kernels, with exact bit patterns, and the
// choice of where reduce.compress applies.
#include "mpiddp/distributed/bf16.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "mpiddp/core/error.hpp"
#include "mpiddp/distributed/compression.hpp"
#include "mpiddp/distributed/gradient_reducer.hpp"
#include "mpiddp/distributed/local_communicator.hpp"

namespace mpiddp::distributed {
namespace {

uint16_t bf16_of_bits(uint32_t bits) { return to_bf16(std::bit_cast<float>(bits)); }

TEST(Bf16, ExactValuesAreKept) {
  EXPECT_EQ(to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(to_bf16(0.0f), 0x0000);
  EXPECT_EQ(to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(from_bf16(0x3f80), 1.0f);
  EXPECT_EQ(from_bf16(0x4049), 3.140625f);  // 1.1001001b * 2 = 3 + 9/64
  for (uint32_t h = 0; h < 0x10000; ++h) {  // every bf16 round-trips (NaNs stay NaN)
    const float f = from_bf16(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(from_bf16(to_bf16(f))));
    } else {
      ASSERT_EQ(to_bf16(f), h) << std::hex << h;
    }
  }
}

TEST(Bf16, RoundsToNearestTiesToEven) {
  // 1 + 2^-8 lies halfway between 1 (0x3f80, even) and 1 + 2^-7 (0x3f81): down to even.
  EXPECT_EQ(bf16_of_bits(0x3f808000), 0x3f80);
  // 1 + 3 * 2^-8: halfway between 0x3f81 (odd) and 0x3f82 (even): up to even.
  EXPECT_EQ(bf16_of_bits(0x3f818000), 0x3f82);
  // One float ulp either side of the first tie: the nearer neighbour.
  EXPECT_EQ(bf16_of_bits(0x3f808001), 0x3f81);
  EXPECT_EQ(bf16_of_bits(0x3f807fff), 0x3f80);
  // Negative values round by magnitude, the same way.
  EXPECT_EQ(bf16_of_bits(0xbf818000), 0xbf82);
  // The carry moves to the next binade: (2 - 2^-8) rounds up to 2.
  EXPECT_EQ(to_bf16(2.0f - 0x1p-8f), 0x4000);
  // 1/3 = 0x3eaaaaab: the dropped 0xaaab is above half, so up.
  EXPECT_EQ(to_bf16(1.0f / 3.0f), 0x3eab);
}

TEST(Bf16, Subnormals) {
  // The smallest bf16 subnormal is 2^-133 (0x0001 = float bits 0x00010000).
  EXPECT_EQ(from_bf16(0x0001), 0x1p-133f);
  EXPECT_EQ(bf16_of_bits(0x00010000), 0x0001);
  // Half of it is a tie with 0 (even): 0. A hair more: 2^-133.
  EXPECT_EQ(bf16_of_bits(0x00008000), 0x0000);
  EXPECT_EQ(bf16_of_bits(0x00008001), 0x0001);
  // 1.5 * 2^-133: a tie between 0x0001 (odd) and 0x0002: up.
  EXPECT_EQ(bf16_of_bits(0x00018000), 0x0002);
  // The smallest float subnormal 2^-149 rounds to zero, keeping its sign.
  EXPECT_EQ(bf16_of_bits(0x00000001), 0x0000);
  EXPECT_EQ(bf16_of_bits(0x80000001), 0x8000);
  // The largest float subnormal rounds up into the smallest normal bf16 2^-126.
  EXPECT_EQ(bf16_of_bits(0x007fffff), 0x0080);
}

TEST(Bf16, InfinityNanAndTheLargestValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(to_bf16(inf), 0x7f80);
  EXPECT_EQ(to_bf16(-inf), 0xff80);
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::quiet_NaN()), 0x7fc0);
  // A NaN whose payload is only in the dropped bits must not become Inf.
  EXPECT_EQ(bf16_of_bits(0x7f800001), 0x7fc0);
  EXPECT_EQ(bf16_of_bits(0xff800001), 0xffc0);
  EXPECT_EQ(bf16_of_bits(0x7fa00000), 0x7fe0);  // payload kept, quiet bit set
  // The largest bf16 (2 - 2^-7) * 2^127 is kept; half an ulp above it is a tie with an odd
  // significand: up to Inf. FLT_MAX is beyond that tie: Inf, as IEEE rounding gives.
  EXPECT_EQ(bf16_of_bits(0x7f7f0000), 0x7f7f);
  EXPECT_EQ(bf16_of_bits(0x7f7f7fff), 0x7f7f);
  EXPECT_EQ(bf16_of_bits(0x7f7f8000), 0x7f80);
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(to_bf16(-std::numeric_limits<float>::max()), 0xff80);
}

TEST(Bf16, PartsAreSummedInFloatAndRoundedOnce) {
  // Three parts of 2 elements. Element 0: 1 + 2^-7 + 2^-7 = 1 + 2^-6 exactly (a bf16 sum
  // would be the same). Element 1: 256 + 1 + 1: in bf16 step by step 256 + 1 = 257 is a tie
  // that rounds to 256, twice, giving 256; in float32 the sum is 258, which is a bf16.
  const std::vector<uint16_t> parts = {to_bf16(1.0f), to_bf16(256.0f),
                                       to_bf16(0x1p-7f), to_bf16(1.0f),
                                       to_bf16(0x1p-7f), to_bf16(1.0f)};
  std::vector<uint16_t> out(2);
  sum_bf16_parts(parts.data(), 3, 2, 2, 1.0f, out.data());
  EXPECT_EQ(from_bf16(out[0]), 1.0f + 0x1p-6f);
  EXPECT_EQ(from_bf16(out[1]), 258.0f);
  // The scale is applied to the float32 sum: (1 + 2^-6) / 4, exact.
  sum_bf16_parts(parts.data(), 3, 2, 2, 0.25f, out.data());
  EXPECT_EQ(from_bf16(out[0]), (1.0f + 0x1p-6f) / 4);
  // Output in place of the first part, many blocks: 5000 elements of 1 + 2 + 4.
  const size_t n = 5000;
  std::vector<uint16_t> big(3 * n);
  for (size_t i = 0; i < n; ++i) {
    big[i] = to_bf16(1.0f);
    big[n + i] = to_bf16(2.0f);
    big[2 * n + i] = to_bf16(4.0f);
  }
  sum_bf16_parts(big.data(), 3, n, n, 1.0f, big.data());
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(from_bf16(big[i]), 7.0f) << i;
}

TEST(Bf16, CompressAndDecompressBuffers) {
  const std::vector<float> in = {1.0f, 1.0f + 0x1p-8f, 1.0f / 3.0f, -0.0f};
  std::vector<uint16_t> wire(in.size());
  compress_bf16(in.data(), wire.data(), in.size());
  EXPECT_EQ(wire, (std::vector<uint16_t>{0x3f80, 0x3f80, 0x3eab, 0x8000}));
  std::vector<float> back(in.size());
  decompress_bf16(wire.data(), back.data(), wire.size());
  EXPECT_EQ(back[2], 0.333984375f);  // 0x3eab: 1.0101011b * 2^-2 = 171 / 512
}

TEST(Compression, AppliesOnlyBetweenNodes) {
  EXPECT_EQ(parse_compression("none"), Compression::kNone);
  EXPECT_EQ(parse_compression("bf16"), Compression::kBf16);
  EXPECT_THROW(parse_compression("fp16"), ConfigError);
  // Two nodes of two: applied, nothing to say.
  auto c = choose_compression(Compression::kBf16, 4, 2);
  EXPECT_EQ(c.applied, Compression::kBf16);
  EXPECT_TRUE(c.note.empty());
  // Every rank its own node (the flat path): the whole allreduce crosses nodes.
  EXPECT_EQ(choose_compression(Compression::kBf16, 2, 1).applied, Compression::kBf16);
  // One node, one process: nothing between nodes; the note says so.
  c = choose_compression(Compression::kBf16, 4, 4);
  EXPECT_EQ(c.applied, Compression::kNone);
  EXPECT_NE(c.note.find("one node"), std::string::npos);
  c = choose_compression(Compression::kBf16, 1, 1);
  EXPECT_EQ(c.applied, Compression::kNone);
  EXPECT_NE(c.note.find("one process"), std::string::npos);
  // Not requested: nothing to say.
  EXPECT_TRUE(choose_compression(Compression::kNone, 4, 4).note.empty());
}

TEST(Compression, RefusedForFloat64Models) {
  LocalCommunicator comm;
  ReduceConfig config;
  config.compress = "bf16";
  try {
    GradientReducer<double> reducer(comm, config);
    FAIL() << "a float64 reducer accepted bf16";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("reduce.compress"), std::string::npos) << e.what();
  }
  // float32 on one process: accepted, not applied, and the note says why.
  GradientReducer<float> reducer(comm, config);
  EXPECT_EQ(reducer.compression(), Compression::kNone);
  EXPECT_FALSE(reducer.compression_note().empty());
  config.compress = "fp8";
  EXPECT_THROW(GradientReducer<float>(comm, config), ConfigError);
}

}  // namespace
}  // namespace mpiddp::distributed
