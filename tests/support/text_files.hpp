#pragma once
// Small text helpers of the unit tests: a file with given contents in the test's temporary
// directory, and how often a part occurs in a document (an SVG's elements).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace mpiddp::test {

// Writes text to TempDir()/name and returns the path.
inline std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

// The number of (possibly overlapping) occurrences of part in text.
inline size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

}  // namespace mpiddp::test
