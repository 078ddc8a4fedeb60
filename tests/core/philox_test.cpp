#include <gtest/gtest.h>

#include "mpiddp/core/philox.hpp"

namespace mpiddp {
namespace {

// Random123's known-answer vectors, tests/kat_vectors (github.com/DEShawResearch/random123),
// the three "philox4x32 10" lines: counter (4 words), key (2 words), expected (4 words).
//   philox4x32 10 00000000 00000000 00000000 00000000 00000000 00000000   6627e8d5 e169c58d bc57ac4c 9b00dbd8
//   philox4x32 10 ffffffff ffffffff ffffffff ffffffff ffffffff ffffffff   408f276d 41c83b0e a20bc7c6 6d5451fd
//   philox4x32 10 243f6a88 85a308d3 13198a2e 03707344 a4093822 299f31d0   d16cfe09 94fdcceb 5001e420 24126ea1
// (The last inputs are the first hex digits of pi.)
struct KnownAnswer {
  PhiloxCounter counter;
  PhiloxKey key;
  PhiloxCounter expected;
};

constexpr KnownAnswer kKnownAnswers[] = {
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

// It is constexpr: the first vector holds at compile time already.
static_assert(philox4x32_10({0, 0, 0, 0}, {0, 0}) ==
              PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});

TEST(Philox, MatchesRandom123KnownAnswers) {
  for (const KnownAnswer& answer : kKnownAnswers) {
    const PhiloxCounter result = philox4x32_10(answer.counter, answer.key);
    for (size_t i = 0; i < 4; ++i)
      EXPECT_EQ(result[i], answer.expected[i]) << std::hex << "word " << i << " of counter "
                                               << answer.counter[0] << ", key " << answer.key[0];
  }
}

// A second, deliberately different implementation of the same definition: the 32x32 -> 64
// bit product from 16-bit halves, and round r's key in closed form (k + r W) instead of
// bumped step by step. It agreeing on many inputs guards against a slip the three vectors
// would miss (they are all-zero, all-one and one arbitrary input).
uint32_t mulhi_from_halves(uint32_t a, uint32_t b, uint32_t* lo) {
  const uint32_t a0 = a & 0xffff, a1 = a >> 16, b0 = b & 0xffff, b1 = b >> 16;
  const uint32_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
  const uint32_t middle = (p00 >> 16) + (p01 & 0xffff) + (p10 & 0xffff);  // < 3 * 2^16
  *lo = (middle << 16) | (p00 & 0xffff);
  return p11 + (p01 >> 16) + (p10 >> 16) + (middle >> 16);
}

PhiloxCounter reference_philox(PhiloxCounter c, PhiloxKey k) {
  for (uint32_t r = 0; r < 10; ++r) {
    const uint32_t k0 = k[0] + r * 0x9E3779B9u, k1 = k[1] + r * 0xBB67AE85u;
    uint32_t lo0, lo1;
    const uint32_t hi0 = mulhi_from_halves(0xD2511F53u, c[0], &lo0);
    const uint32_t hi1 = mulhi_from_halves(0xCD9E8D57u, c[2], &lo1);
    c = {hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0};
  }
  return c;
}

TEST(Philox, ReferenceImplementationPassesTheKnownAnswersToo) {
  for (const KnownAnswer& answer : kKnownAnswers)
    EXPECT_EQ(reference_philox(answer.counter, answer.key), answer.expected);
}

TEST(Philox, AgreesWithTheReferenceOnManyInputs) {
  uint64_t s = 12345;
  auto next = [&s] {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint32_t>(s >> 32);
  };
  for (int i = 0; i < 2000; ++i) {
    const PhiloxCounter c = {next(), next(), next(), next()};
    const PhiloxKey k = {next(), next()};
    ASSERT_EQ(philox4x32_10(c, k), reference_philox(c, k)) << "input " << i;
  }
}

TEST(Philox, NeighbouringCountersGiveUnrelatedWords) {
  // Counter-based: counters 0 and 1 share no structure in their outputs. About half of the
  // 128 bits differ; 30..98 is beyond 6 standard deviations (sqrt(128)/2 = 5.7) either way.
  const PhiloxCounter a = philox4x32_10({0, 7, 3, 1}, {11, 13});
  const PhiloxCounter b = philox4x32_10({1, 7, 3, 1}, {11, 13});
  int differing = 0;
  for (size_t i = 0; i < 4; ++i) differing += __builtin_popcount(a[i] ^ b[i]);
  EXPECT_GT(differing, 30);
  EXPECT_LT(differing, 98);
}

}  // namespace
}  // namespace mpiddp
