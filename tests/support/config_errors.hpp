#pragma once
// Config tests check that a bad value is refused with exit 2 and the key path named.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mpiddp/core/error.hpp"
#include "mpiddp/config/config.hpp"

namespace mpiddp::test {

// The key path of the ConfigError that parse() throws (its exit code checked), or
// "(no error)" when it throws none.
template <typename Parse>
std::string config_error_key(Parse&& parse) {
  try {
    parse();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.code(), kExitConfig);
    return e.key_path();
  }
  return "(no error)";
}

// The key path of the error that the default experiment with these --set overrides gives,
// parsed and its per-rank batch resolved for 2 ranks, as the trainer does.
inline std::string overrides_error_key(const std::vector<std::string>& assignments) {
  return config_error_key([&] {
    io::Json user = config::default_experiment();
    for (const std::string& a : assignments) config::apply_override(user, a);
    config::parse_config(user).per_rank_batch(2);
  });
}
inline std::string override_error_key(const std::string& assignment) {
  return overrides_error_key({assignment});
}

}  // namespace mpiddp::test
