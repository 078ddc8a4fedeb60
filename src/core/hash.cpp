#include "mpiddp/core/hash.hpp"

#include <cstdio>

namespace mpiddp {

std::string hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace mpiddp
