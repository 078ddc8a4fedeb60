#pragma once
// Numbers given on a subcommand's command line, each checked against its range: a ConfigError
// (exit 2) names the flag, the range and what was given.
#include <cstdint>
#include <string>

namespace mpiddp::tools {

// A whole number in [least, most]; `why`, when given, says where the range comes from.
int64_t parse_whole(const std::string& flag, const std::string& text, int64_t least, int64_t most,
                    const std::string& why = "");

// A finite number with least <= value < most_excluded ("expected" names the range in words).
double parse_number_below(const std::string& flag, const std::string& text, double least, double most_excluded,
                          const std::string& expected);

}  // namespace mpiddp::tools
