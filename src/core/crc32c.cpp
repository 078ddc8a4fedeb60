#include "mpiddp/core/crc32c.hpp"

#include <array>

namespace mpiddp {

namespace {

// crc_table[b]: the CRC register after shifting byte b through eight steps of the reflected
// polynomial, so a byte costs one lookup instead of eight conditional xors.
constexpr std::array<uint32_t, 256> crc_make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t r = b;
    for (int bit = 0; bit < 8; ++bit) r = (r & 1) ? (r >> 1) ^ 0x82F63B78u : r >> 1;
    table[b] = r;
  }
  return table;
}

constexpr std::array<uint32_t, 256> crc_table = crc_make_table();

}  // namespace

uint32_t crc32c(const void* data, size_t bytes, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t r = ~crc;  // the register holds the complement between calls
  for (size_t i = 0; i < bytes; ++i) r = (r >> 8) ^ crc_table[(r ^ p[i]) & 0xFF];
  return ~r;
}

}  // namespace mpiddp
