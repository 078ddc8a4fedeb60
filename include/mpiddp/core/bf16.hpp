#pragma once
// bfloat16: the upper 16 bits of a float32 (sign, the same 8-bit exponent, 7 stored
// significand bits). Same range as float32, 8 significant bits: unit roundoff 2^-8.
// One rounding for the whole project: the compressed exchange (distributed/bf16.hpp) and the
// bf16 products (kernels/precision.hpp) round the same way.
#include <bit>
#include <cstdint>

namespace mpiddp {

// Round to nearest, ties to even. Inf stays Inf; every NaN stays a NaN (quiet, same sign):
// truncating a NaN whose payload lies only in the low 16 bits would give Inf. Finite values
// beyond the largest bf16 (plus half an ulp) round to Inf, as IEEE rounding does.
inline uint16_t to_bf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  // Adding 0x7fff rounds halves down, 0x8000 rounds them up: the kept part's lowest bit
  // picks, which makes ties go to the even neighbour. The carry may ripple into the
  // exponent, which is the correct next binade (or Inf).
  const uint32_t lsb = (bits >> 16) & 1u;
  return static_cast<uint16_t>((bits + 0x7fffu + lsb) >> 16);
}

// Exact: every bf16 is a float32.
inline float from_bf16(uint16_t value) {
  return std::bit_cast<float>(static_cast<uint32_t>(value) << 16);
}

}  // namespace mpiddp
