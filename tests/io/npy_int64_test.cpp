#include "mpiddp/io/npy_int64.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "mpiddp/core/error.hpp"

namespace mpiddp::io {
namespace {

// An .npy file as numpy.save writes it: magic, version, header length, a dict padded with
// spaces and ending in a newline, then the data.
std::vector<char> npy(const std::string& dict, const std::vector<int64_t>& values, int major = 1) {
  std::string header = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::vector<char> file = {'\x93', 'N', 'U', 'M', 'P', 'Y', static_cast<char>(major), 0};
  if (major == 1) {
    file.push_back(static_cast<char>(header.size() & 0xff));
    file.push_back(static_cast<char>(header.size() >> 8));
  } else {
    const uint32_t n = static_cast<uint32_t>(header.size());
    file.resize(12);
    std::memcpy(file.data() + 8, &n, 4);
  }
  file.insert(file.end(), header.begin(), header.end());
  const size_t at = file.size();
  file.resize(at + values.size() * 8);
  if (!values.empty()) std::memcpy(file.data() + at, values.data(), values.size() * 8);
  return file;
}

std::string error_of(const std::vector<char>& bytes) {
  try {
    parse_npy_int64(bytes, "order.npy");
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("order.npy"), std::string::npos);
    return e.what();
  }
  return "(no error)";
}

TEST(NpyInt64, ReadsVersions1And3) {
  for (int major : {1, 3}) {
    const auto a = parse_npy_int64(
        npy("{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }", {0, 1, 2, 5, 4, 3}, major),
        "order.npy");
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(a.values, (std::vector<int64_t>{0, 1, 2, 5, 4, 3}));
  }
  const auto one_d = parse_npy_int64(npy("{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }",
                                         {7, 8, 9, 10}),
                                     "v.npy");
  EXPECT_EQ(one_d.shape, (std::vector<int64_t>{4}));
}

TEST(NpyInt64, RejectsWhatItCannotReadExactly) {
  const std::string good = "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2), }";
  EXPECT_NE(error_of(npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2), }", {1, 2})).find("'<i4'"),
            std::string::npos);
  EXPECT_NE(error_of(npy("{'descr': '<i8', 'fortran_order': True, 'shape': (2, 2), }", {1, 2, 3, 4}))
                .find("Fortran"),
            std::string::npos);
  EXPECT_NE(error_of(npy(good, {1, 2, 3})).find("truncated"), std::string::npos);
  EXPECT_NE(error_of(npy(good, {1, 2, 3, 4, 5})).find("trailing"), std::string::npos);
  auto bad_magic = npy(good, {1, 2, 3, 4});
  bad_magic[1] = 'X';
  EXPECT_NE(error_of(bad_magic).find("magic"), std::string::npos);
  const auto whole = npy(good, {1, 2, 3, 4});
  for (size_t n = 0; n < whole.size(); ++n)
    EXPECT_NE(error_of(std::vector<char>(whole.begin(), whole.begin() + static_cast<long>(n))),
              "(no error)")
        << n;
}

}  // namespace
}  // namespace mpiddp::io
