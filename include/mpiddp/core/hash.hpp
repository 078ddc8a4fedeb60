#pragma once
// FNV-1a, 64-bit: a stable checksum for parameter buffers and configs. It is not
// cryptographic; it only has to tell replicas and configs apart, identically everywhere.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mpiddp {

inline uint64_t fnv1a(const void* data, size_t bytes, uint64_t hash = 0xcbf29ce484222325ULL) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    hash ^= p[i];
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

inline uint64_t fnv1a(std::string_view text) { return fnv1a(text.data(), text.size()); }

// 16 lowercase hex digits.
std::string hex64(uint64_t value);

}  // namespace mpiddp
