// The tokens source: nanoGPT's .bin (raw uint16, no header), llm.c's (a 1024-byte header) and
// 1-D integer .npy, in the text source's windows, with the data errors that name the file.
#include "mpiddp/data/tokens.hpp"

#include <gtest/gtest.h>

#include "fixture_files.hpp"
#include "mpiddp/core/error.hpp"

namespace mpiddp::data {
namespace {

using testing::bytes_of;
using testing::expect_data_error;
using testing::fixture_dir;
using testing::npy_bytes;
using testing::write_file;

// uint16 little-endian, as np.array(ids, dtype=np.uint16).tofile() writes them.
std::string uint16_bytes(const std::vector<int>& ids) {
  std::string bytes;
  for (const int id : ids) {
    bytes += static_cast<char>(id & 0xff);
    bytes += static_cast<char>(id >> 8);
  }
  return bytes;
}

TokensConfig tokens_file(const std::string& name, const std::string& contents, Index vocab, Index block) {
  TokensConfig c;
  c.path = fixture_dir() + "/" + name;
  write_file(c.path, contents);
  c.vocab = vocab;
  c.windows.block = block;
  return c;
}

std::vector<int32_t> token_ids_of(const int32_t* first, Index count) { return std::vector<int32_t>(first, first + count); }

TEST(Tokens, NanoGptBinInWindows) {
  // 7 tokens, windows of 3 at stride 2: starts 0, 2, 4 (4 + 3 <= 7).
  TokensConfig c = tokens_file("train.bin", uint16_bytes({300, 1, 2, 3, 4, 5, 6}), 301, 2);
  const auto d = load_tokens<float>(c);
  EXPECT_EQ(d.samples, 3);
  EXPECT_EQ(d.classes, 301);
  EXPECT_EQ(token_ids_of(d.token_ids + d.token_offset(0), 2), (std::vector<int32_t>{300, 1}));
  EXPECT_EQ(token_ids_of(d.labels + d.label_offset(2), 2), (std::vector<int32_t>{5, 6}));
  c.windows.stride = 1;
  EXPECT_EQ(load_tokens<float>(c).samples, 5);
}

TEST(Tokens, LlmcHeaderAndNpy) {
  TokensConfig llmc = tokens_file("val.bin", std::string(1024, '\x7f') + uint16_bytes({65535, 0, 7}), 65536, 2);
  llmc.header_bytes = 1024;
  const auto d = load_tokens<float>(llmc);
  EXPECT_EQ(d.samples, 1);
  EXPECT_EQ(token_ids_of(d.token_ids, 2), (std::vector<int32_t>{65535, 0}));
  EXPECT_EQ(token_ids_of(d.labels, 2), (std::vector<int32_t>{0, 7}));
  TokensConfig npy = tokens_file("ids.npy", npy_bytes("<i8", "(4,)", bytes_of(std::vector<int64_t>{3, 1, 4, 1})), 5, 3);
  const auto n = load_tokens<float>(npy);
  EXPECT_EQ(n.samples, 1);
  EXPECT_EQ(token_ids_of(n.token_ids, 3), (std::vector<int32_t>{3, 1, 4}));
  EXPECT_EQ(token_ids_of(n.labels, 3), (std::vector<int32_t>{1, 4, 1}));
}

TEST(Tokens, ErrorsNameTheFile) {
  const TokensConfig odd = tokens_file("odd.bin", uint16_bytes({1, 2, 3}) + "x", 10, 1);
  expect_data_error([&] { load_tokens<float>(odd); }, {odd.path, "7 bytes", "not whole uint16 tokens"});
  const TokensConfig big = tokens_file("big.bin", uint16_bytes({1, 2, 10, 3}), 10, 1);
  expect_data_error([&] { load_tokens<float>(big); }, {big.path, "token 2 (0-based) is 10, outside [0, 10)"});
  const TokensConfig npy = tokens_file("big.npy", npy_bytes("<i4", "(3,)", bytes_of(std::vector<int32_t>{0, 12, 1})), 10, 1);
  expect_data_error([&] { load_tokens<float>(npy); }, {npy.path, "token 1 (0-based) has token id 12", "[0, 10)"});
  const TokensConfig flat = tokens_file("two.npy", npy_bytes("<i4", "(1, 3)", bytes_of(std::vector<int32_t>{0, 1, 2})), 10, 1);
  expect_data_error([&] { load_tokens<float>(flat); }, {flat.path, "1-D"});
  const TokensConfig shorter = tokens_file("short.bin", uint16_bytes({1, 2}), 10, 2);
  expect_data_error([&] { load_tokens<float>(shorter); }, {shorter.path, "fewer than one window of block + 1 = 3"});
}

}  // namespace
}  // namespace mpiddp::data
