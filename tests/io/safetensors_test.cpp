#include "mpiddp/io/safetensors.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "mpiddp/core/error.hpp"
#include "mpiddp/io/atomic_file.hpp"

namespace mpiddp::io {
namespace {

// A file assembled by hand, as another writer (Python's safetensors) lays it out: an
// unpadded header with tensors out of offset order, then the raw little-endian data.
std::vector<char> hand_made_file(const std::string& header, const std::vector<char>& data) {
  std::vector<char> file(8 + header.size() + data.size());
  const uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  std::copy(header.begin(), header.end(), file.begin() + 8);
  std::copy(data.begin(), data.end(), file.begin() + 8 + static_cast<long>(header.size()));
  return file;
}

template <typename T>
std::vector<char> raw(std::initializer_list<T> values) {
  std::vector<char> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), std::data(values), bytes.size());
  return bytes;
}

std::string error_of(const std::vector<char>& bytes) {
  try {
    SafetensorsFile file(bytes, "f.safetensors", kExitData);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitData);
    EXPECT_NE(std::string(e.what()).find("f.safetensors"), std::string::npos) << e.what();
    return e.what();
  }
  return "(no error)";
}

TEST(Safetensors, RoundTripKeepsNamesShapesValuesAndMetadata) {
  const float w[6] = {1.5f, -2.0f, 3.25f, 0.0f, -0.5f, 1e-7f};  // [2, 3]
  const double b[2] = {0.1, -1e300};
  const std::vector<char> file =
      encode_safetensors({{"0.weight", TensorDtype::kF32, {2, 3}, w},
                          {"0.bias", TensorDtype::kF64, {2}, b}},
                         {{"producer", "test"}});
  // 8-byte length, header padded to a multiple of 8, then 24 + 16 data bytes.
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, file.data(), 8);
  EXPECT_EQ(header_bytes % 8, 0u);
  EXPECT_EQ(file.size(), 8 + header_bytes + 24 + 16);

  const SafetensorsFile parsed(file, "round.safetensors", kExitData);
  ASSERT_EQ(parsed.tensors().size(), 2u);
  EXPECT_EQ(parsed.metadata().at("producer"), "test");
  const StoredTensor* weight = parsed.find("0.weight");
  ASSERT_NE(weight, nullptr);
  EXPECT_EQ(weight->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(weight->dtype, TensorDtype::kF32);
  float w_back[6];
  parsed.read(*weight, w_back);
  EXPECT_EQ(std::memcmp(w, w_back, sizeof w), 0);
  double b_back[2];
  parsed.read(*parsed.find("0.bias"), b_back);
  EXPECT_EQ(b_back[0], 0.1);
  EXPECT_EQ(b_back[1], -1e300);
}

TEST(Safetensors, ReadsAnotherWritersLayoutAndConvertsDtypes) {
  // "b" comes first in the data section although listed second in the header.
  const std::string header =
      R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[4,20]},)"
      R"("b":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})";
  std::vector<char> data = raw<float>({0.25f});
  const auto a = raw<double>({1.0 / 3.0, -7.0});
  data.insert(data.end(), a.begin(), a.end());
  const SafetensorsFile file(hand_made_file(header, data), "x", kExitData);
  float a_as_float[2];
  file.read(*file.find("a"), a_as_float);  // F64 file into a float32 run rounds each value
  EXPECT_EQ(a_as_float[0], static_cast<float>(1.0 / 3.0));
  EXPECT_EQ(a_as_float[1], -7.0f);
  double b_as_double = 0;
  file.read(*file.find("b"), &b_as_double);  // F32 -> F64 is exact
  EXPECT_EQ(b_as_double, 0.25);
  EXPECT_EQ(file.find("b")->elements(), 1);  // a scalar has shape []
}

TEST(Safetensors, I64CountersRoundTripAsPyTorchWritesThem) {
  // PyTorch saves BatchNorm's num_batches_tracked as an int64 scalar: dtype I64, shape [].
  const std::string header = R"({"n":{"dtype":"I64","shape":[],"data_offsets":[0,8]}})";
  const int64_t big = (int64_t{1} << 53) + 1;  // not representable in a double: read exactly
  const SafetensorsFile file(hand_made_file(header, raw<int64_t>({big})), "x", kExitData);
  int64_t n = 0;
  file.read(*file.find("n"), &n);
  EXPECT_EQ(n, big);
  const int64_t written = 42;
  const auto bytes = encode_safetensors({{"c", TensorDtype::kI64, {}, &written}}, {});
  const SafetensorsFile again(bytes, "y", kExitData);
  EXPECT_EQ(again.find("c")->dtype, TensorDtype::kI64);
  EXPECT_EQ(again.find("c")->end - again.find("c")->begin, 8u);
  again.read(*again.find("c"), &n);
  EXPECT_EQ(n, 42);
}

TEST(Safetensors, EveryTruncationIsAnErrorNeverACrash) {
  const float w[4] = {1, 2, 3, 4};
  const auto file = encode_safetensors({{"0.weight", TensorDtype::kF32, {2, 2}, w}}, {});
  for (size_t length = 0; length < file.size(); ++length) {
    const std::vector<char> cut(file.begin(), file.begin() + static_cast<long>(length));
    EXPECT_NE(error_of(cut), "(no error)") << "length " << length;
  }
}

TEST(Safetensors, MalformedHeadersNameTheProblem) {
  std::vector<char> huge(16, 0);
  const uint64_t n = uint64_t{1} << 40;
  std::memcpy(huge.data(), &n, 8);
  EXPECT_NE(error_of(huge).find("exceeds the limit"), std::string::npos);

  struct Case {
    std::string header;
    size_t data_bytes;
    std::string expected;  // a part of the message
  };
  const Case cases[] = {
      {"{not json", 0, "not valid JSON"},
      {"[1,2]", 0, "not a JSON object"},
      {R"({"t":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]}})", 2, "BF16 is not supported"},
      // shape [3] of F32 is 12 bytes, the range spans 8
      {R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8, "needs 12 bytes"},
      {R"({"t":{"dtype":"F32","shape":[-3],"data_offsets":[0,8]}})", 8, "negative"},
      {R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8, "truncated"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12, "overlap"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, "belong to no tensor"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8, "after the last tensor"},
      {R"({"a":{"dtype":"F32","shape":[1]}})", 0, "expected exactly the keys"},
      {R"({"__metadata__":{"k":1}})", 0, "not a string"},
      // An impossibly large shape must not overflow into a small byte count.
      {R"({"t":{"dtype":"F64","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}})", 0,
       "impossibly large"},
  };
  for (const Case& c : cases) {
    const std::string message = error_of(hand_made_file(c.header, std::vector<char>(c.data_bytes, 0)));
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.header << "\n  -> " << message;
  }
}

TEST(Safetensors, MissingFileIsNamed) {
  try {
    read_safetensors("/nonexistent/w.safetensors", kExitData, "init.weights");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitData);
    EXPECT_NE(std::string(e.what()).find("init.weights: cannot open '/nonexistent/w.safetensors'"),
              std::string::npos)
        << e.what();
  }
}

TEST(Safetensors, MappedFileReadsAsTheReadOneAndItsSlices) {
  // Conversions included: F64 values read as float, slices anywhere in a tensor.
  const double w[6] = {1.5, -2.0, 3.25, 0.0, -0.5, 1e-7};
  const float b[3] = {0.25f, -4.0f, 8.5f};
  const std::vector<char> bytes = encode_safetensors(
      {{"w", TensorDtype::kF64, {2, 3}, w}, {"b", TensorDtype::kF32, {3}, b}}, {{"producer", "test"}});
  const std::string path = ::testing::TempDir() + "mapped.safetensors";
  write_file_atomically(path, {{bytes.data(), bytes.size()}});
  const SafetensorsFile read = read_safetensors(path, kExitData);
  const SafetensorsFile mapped = map_safetensors(path, kExitData);
  ASSERT_EQ(mapped.tensors().size(), 2u);
  EXPECT_EQ(mapped.metadata(), read.metadata());
  EXPECT_EQ(mapped.data_checksum(), read.data_checksum());
  EXPECT_EQ(mapped.data_bytes(), 48u + 12u);
  float whole[6] = {}, slice[3] = {};
  mapped.read(*mapped.find("w"), whole);
  EXPECT_EQ(whole[2], 3.25f);
  EXPECT_EQ(whole[5], 1e-7f);
  mapped.read_range(*mapped.find("w"), 2, 3, slice);  // values 2, 3 and 4 of 6
  EXPECT_EQ(slice[0], 3.25f);
  EXPECT_EQ(slice[1], 0.0f);
  EXPECT_EQ(slice[2], -0.5f);
  double last = 0;
  read.read_range(*read.find("b"), 2, 1, &last);
  EXPECT_EQ(last, 8.5);
  std::remove(path.c_str());
}

TEST(Safetensors, WhatCannotBeMappedFailsAsAReadDoes) {
  const std::string empty = ::testing::TempDir() + "empty.safetensors";
  write_file_atomically(empty, std::vector<ByteSpan>{});
  for (const std::string& path : {std::string("/nonexistent/w.safetensors"), empty}) {
    std::string read_error, map_error;
    try {
      read_safetensors(path, kExitData, "init.weights");
    } catch (const Error& e) {
      read_error = e.what();
    }
    try {
      map_safetensors(path, kExitData, "init.weights");
    } catch (const Error& e) {
      map_error = e.what();
      EXPECT_EQ(e.code(), kExitData);
    }
    EXPECT_FALSE(map_error.empty()) << path;
    EXPECT_EQ(map_error, read_error);
  }
  std::remove(empty.c_str());
}

}  // namespace
}  // namespace mpiddp::io
