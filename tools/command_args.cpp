#include "command_args.hpp"

#include <cmath>
#include <cstdlib>

#include "mpiddp/core/error.hpp"

namespace mpiddp::tools {

int64_t parse_whole(const std::string& flag, const std::string& text, int64_t least, int64_t most,
                    const std::string& why) {
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < least || value > most)
    throw ConfigError(flag, "expected a whole number in [" + std::to_string(least) + ", " + std::to_string(most) +
                                "]" + why + ", got '" + text + "'");
  return value;
}

double parse_number_below(const std::string& flag, const std::string& text, double least, double most_excluded,
                          const std::string& expected) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(value) || !(value >= least && value < most_excluded))
    throw ConfigError(flag, "expected " + expected + ", got '" + text + "'");
  return value;
}

}  // namespace mpiddp::tools
