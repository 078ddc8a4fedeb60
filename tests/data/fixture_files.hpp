#pragma once
// Writes small data files for the reader tests: .npy, IDX, CSV, plain or gzip. Each test
// builds its own fixtures, so no data file is checked in.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "mpiddp/core/error.hpp"

namespace mpiddp::data::testing {

// A fresh folder per test, named after it.
inline std::string fixture_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto dir = std::filesystem::path(::testing::TempDir()) / "mpiddp_data" /
                   (std::string(info->test_suite_name()) + "." + info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr) << path;
  ASSERT_EQ(gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(gz), Z_OK);
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The values' bytes, little- or big-endian.
template <typename T>
std::string bytes_of(const std::vector<T>& values, bool big_endian = false) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  if (big_endian != (std::endian::native == std::endian::big))
    for (size_t i = 0; i < values.size(); ++i)
      std::reverse(out.begin() + static_cast<long>(i * sizeof(T)),
                   out.begin() + static_cast<long>((i + 1) * sizeof(T)));
  return out;
}

// A .npy file as NumPy writes it: magic, version, header length, the dict padded with
// spaces and a newline so the data starts at a multiple of 64 bytes.
inline std::string npy_bytes(const std::string& descr, const std::string& shape,
                             const std::string& data, int version = 1, bool fortran = false) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                     ", 'shape': " + shape + ", }";
  const size_t prefix = version == 1 ? 10 : 12;
  while ((prefix + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(version);
  out += '\0';
  const auto n = static_cast<uint32_t>(dict.size());
  for (size_t i = 0; i < prefix - 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + dict + data;
}

// An IDX file: 0, 0, type code, dimension count, big-endian dims, then the data.
inline std::string idx_bytes(unsigned char type, const std::vector<uint32_t>& dims,
                             const std::string& data) {
  std::string out = {'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  return out + bytes_of(dims, /*big_endian=*/true) + data;
}

// Expects a DataError whose message contains every one of `parts`.
template <typename Fn>
void expect_data_error(Fn&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no DataError; expected one mentioning " << parts.front();
  } catch (const DataError& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
        << "message: " << e.what() << "\nmissing: " << p;
  }
}

}  // namespace mpiddp::data::testing
