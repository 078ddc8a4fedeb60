// The text source: the vocabulary (sorted distinct bytes, or all 256), windows of block + 1
// tokens at a stride inside a range of the file, x and y views of one token array, and the
// data errors that name the file.
#include "mpiddp/data/text.hpp"

#include <gtest/gtest.h>

#include "fixture_files.hpp"
#include "mpiddp/core/error.hpp"

namespace mpiddp::data {
namespace {

using testing::expect_data_error;
using testing::fixture_dir;
using testing::write_file;

TextConfig text_file(const std::string& contents, Index block) {
  TextConfig c;
  c.path = fixture_dir() + "/input.txt";
  write_file(c.path, contents);
  c.windows.block = block;
  return c;
}

std::vector<int32_t> text_ids(const int32_t* first, Index count) { return std::vector<int32_t>(first, first + count); }

TEST(Text, CharsVocabularyAndWindows) {
  // "hello world": vocabulary " dehlorw" (sorted bytes): ' '=0 d=1 e=2 h=3 l=4 o=5 r=6 w=7.
  TextConfig c = text_file("hello world", 3);
  const auto d = load_text<float>(c);
  EXPECT_EQ(d.input_kind(), InputKind::kTokenIds);
  EXPECT_EQ(d.target_kind(), TargetKind::kClassPerPosition);
  EXPECT_EQ(d.classes, 8);
  EXPECT_EQ(d.vocabulary, 8);
  EXPECT_EQ(d.features, 3);
  EXPECT_EQ(d.label_positions, 3);
  // 11 tokens, windows of 4 at stride 3 from 0: starts 0, 3, 6 (6 + 4 <= 11; 9 + 4 > 11).
  EXPECT_EQ(d.samples, 3);
  EXPECT_EQ(text_ids(d.token_ids + d.token_offset(1), 3), (std::vector<int32_t>{4, 5, 0}));  // "lo "
  EXPECT_EQ(text_ids(d.labels + d.label_offset(1), 3), (std::vector<int32_t>{5, 0, 7}));     // "o w"
  EXPECT_EQ(text_ids(d.token_ids + d.token_offset(2), 3), (std::vector<int32_t>{7, 5, 6}));  // "wor"
  EXPECT_EQ(text_ids(d.labels + d.label_offset(2), 3), (std::vector<int32_t>{5, 6, 4}));     // "orl"
}

TEST(Text, StrideRangeAndBytes) {
  TextConfig c = text_file("hello world", 3);
  c.windows.stride = 1;
  EXPECT_EQ(load_text<float>(c).samples, 8);  // starts 0..7
  c.windows.stride = 0;
  c.windows.range_begin = 0.5;  // tokens [5, 11): one window, " wor" -> "worl"
  const auto half = load_text<float>(c);
  EXPECT_EQ(half.samples, 1);
  EXPECT_EQ(text_ids(half.token_ids, 3), (std::vector<int32_t>{0, 7, 5}));
  EXPECT_EQ(half.classes, 8);  // the vocabulary is the whole file's, whatever the range
  c.windows.range_begin = 0.0;
  c.encoding = "bytes";
  const auto bytes = load_text<float>(c);
  EXPECT_EQ(bytes.classes, 256);
  EXPECT_EQ(text_ids(bytes.token_ids, 3), (std::vector<int32_t>{'h', 'e', 'l'}));
}

TEST(Text, ErrorsNameTheFile) {
  TextConfig empty = text_file("", 3);
  expect_data_error([&] { load_text<float>(empty); }, {empty.path, "the text is empty"});
  TextConfig shorter = text_file("abcd", 4);
  expect_data_error([&] { load_text<float>(shorter); }, {shorter.path, "fewer than one window of block + 1 = 5"});
  TextConfig range = text_file("hello world", 3);
  range.windows.range_begin = 0.7;  // tokens [7, 11): 4 tokens, one window of 4 fits
  EXPECT_EQ(load_text<float>(range).samples, 1);
  range.windows.range_begin = 0.8;  // tokens [8, 11)
  expect_data_error([&] { load_text<float>(range); }, {range.path, "holds tokens [8, 11) of 11"});
}

}  // namespace
}  // namespace mpiddp::data
