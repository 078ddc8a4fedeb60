#include "mpiddp/io/base64.hpp"

#include <algorithm>
#include <array>
#include <cstdint>

namespace mpiddp::io {

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int, 256> sextets() {
  std::array<int, 256> value{};
  for (int& v : value) v = -1;
  for (int i = 0; i < 64; ++i) value[static_cast<unsigned char>(kAlphabet[i])] = i;
  return value;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string text;
  text.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t group = 0;
    for (size_t k = 0; k < 3; ++k) group = (group << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) text.push_back(k <= n ? kAlphabet[(group >> (18 - 6 * k)) & 63u] : '=');
  }
  return text;
}

std::optional<std::string> base64_decode(std::string_view text) {
  static constexpr std::array<int, 256> kValue = sextets();
  if (text.size() % 4 != 0) return std::nullopt;
  std::string bytes;
  bytes.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    // Padding only at the end: "xx==" holds one byte, "xxx=" two.
    const size_t padding = last ? (text[i + 3] == '=') + (text[i + 2] == '=' && text[i + 3] == '=') : 0;
    uint32_t group = 0;
    for (size_t k = 0; k < 4; ++k) {
      const int v = k >= 4 - padding ? 0 : kValue[static_cast<unsigned char>(text[i + k])];
      if (v < 0) return std::nullopt;
      group = (group << 6) | static_cast<uint32_t>(v);
    }
    for (size_t k = 0; k < 3 - padding; ++k) bytes.push_back(static_cast<char>((group >> (16 - 8 * k)) & 0xFFu));
  }
  return bytes;
}

}  // namespace mpiddp::io
