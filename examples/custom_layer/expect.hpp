#pragma once
// The example checks' one assertion: prints what failed and counts it; main returns 1 when
// failures is not 0.
#include <cstdio>
#include <string>

namespace swish_example {

inline int failures = 0;

inline void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("FAIL: %s\n", what.c_str());
    ++failures;
  }
}

}  // namespace swish_example
