#pragma once
// Config tests check that a bad value is refused with exit 2 and the key path named.
#include <gtest/gtest.h>

#include <string>

#include "mpiddp/core/error.hpp"

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

}  // namespace mpiddp::test
