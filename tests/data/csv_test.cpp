#include "mpiddp/data/csv.hpp"

#include <gtest/gtest.h>

#include "fixture_files.hpp"
#include "mpiddp/core/error.hpp"

namespace mpiddp::data {
namespace {

using testing::expect_data_error;
using testing::fixture_dir;
using testing::write_file;

CsvConfig write_csv(const std::string& text) {
  CsvConfig c;
  c.path = fixture_dir() + "/data.csv";
  write_file(c.path, text);
  return c;
}

TEST(Csv, HeaderAndNamedTargetColumnsInTheirGivenOrder) {
  CsvConfig c = write_csv("a, y1 ,b,y0\n1,10,2,20\n3,30,4,40\n");
  c.header = true;
  c.target_columns = {{0, "y0"}, {0, "y1"}};
  const auto d = load_csv<double>(c);
  EXPECT_EQ(d.samples, 2);
  EXPECT_EQ(d.features, 2);
  EXPECT_EQ(d.outputs, 2);
  const double x[4] = {1, 2, 3, 4}, y[4] = {20, 10, 40, 30};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(d.x[i], x[i]);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(d.y[i], y[i]);
}

TEST(Csv, NoHeaderLastColumnByDefaultBlankLinesAndCrlf) {
  CsvConfig c = write_csv("0.5,-1e-3,+2\r\n\r\n  1.25 ,\t3,4.5\r\n\n");
  const auto d = load_csv<float>(c);
  EXPECT_EQ(d.samples, 2);
  EXPECT_EQ(d.features, 2);
  EXPECT_EQ(d.outputs, 1);
  EXPECT_EQ(d.x[0], 0.5f);
  EXPECT_EQ(d.x[1], -1e-3f);
  EXPECT_EQ(d.x[2], 1.25f);
  EXPECT_EQ(d.y[0], 2.0f);
  EXPECT_EQ(d.y[1], 4.5f);
}

TEST(Csv, ClassLabelsWithIndexAndDelimiter) {
  CsvConfig c = write_csv("2;0.1;0.2\n0;0.3;0.4\n1;0.5;0.6\n");
  c.delimiter = ';';
  c.target_columns = {{0, ""}};
  c.classes = 3;
  const auto d = load_csv<float>(c);
  ASSERT_TRUE(d.is_classification());
  EXPECT_EQ(d.features, 2);
  EXPECT_EQ(d.labels[0], 2);
  EXPECT_EQ(d.labels[1], 0);
  EXPECT_EQ(d.labels[2], 1);
  EXPECT_EQ(d.x[0], 0.1f);
  EXPECT_EQ(d.x[5], 0.6f);
}

TEST(Csv, MalformedRowsNameTheLine) {
  struct Case { std::string text; bool header; std::vector<std::string> parts; };
  const std::vector<Case> cases = {
      {"1,2,3\n4,5\n", false, {":2:", "2 fields, expected 3"}},
      {"x,y\n1,2\n\n3,4,5\n", true, {":4:", "3 fields, expected 2 like the header"}},
      {"1,2\n3,abc\n", false, {":2:", "column 1", "'abc' is not a number"}},
      {"1,2\n3,\n", false, {":2:", "'' is not a number"}},
      {"1,2\n3,4.5.6\n", false, {":2:", "'4.5.6'"}},
      {"x,y\n1,2\n", false, {":1:", "set \"header\": true"}},
      {"1,2\n\n3,nan\n", false, {":3:", "sample 1", "NaN"}},
      {"1,2\n3,-inf\n", false, {":2:", "sample 1", "Inf"}},
      {"1,1e39\n", false, {":1:", "sample 0", "Inf"}},  // finite in double, not in float32
      {"", false, {"holds no data lines"}},
      {"a,b\n", true, {"holds no data lines"}},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.text);
    CsvConfig c = write_csv(k.text);
    c.header = k.header;
    auto parts = k.parts;
    parts.push_back(c.path);
    expect_data_error([&] { load_csv<float>(c); }, parts);
  }
}

TEST(Csv, BadLabelsAndColumnsAreErrors) {
  CsvConfig c = write_csv("1,0\n2,3.5\n");
  c.classes = 4;
  expect_data_error([&] { load_csv<float>(c); }, {":2:", "sample 1", "label 3.5"});
  c = write_csv("1,0\n2,4\n");
  c.classes = 4;
  expect_data_error([&] { load_csv<float>(c); }, {":2:", "not an integer in [0, 4)"});
  c = write_csv("1,2\n");
  c.target_columns = {{0, "price"}};
  expect_data_error([&] { load_csv<float>(c); }, {"\"price\"", "no header"});
  c = write_csv("a,b\n1,2\n");
  c.header = true;
  c.target_columns = {{0, "price"}};
  expect_data_error([&] { load_csv<float>(c); }, {"no column named \"price\""});
  c.target_columns = {{2, ""}};
  expect_data_error([&] { load_csv<float>(c); }, {"target column 2", "2 columns"});
  c.target_columns = {{0, ""}, {-1, ""}};
  expect_data_error([&] { load_csv<float>(c); }, {"at least one must remain"});
  c.target_columns = {{1, ""}, {-1, ""}};
  expect_data_error([&] { load_csv<float>(c); }, {"listed twice"});
}

TEST(Csv, OverlongLineIsAnErrorNotAHugeAllocation) {
  CsvConfig c = write_csv(std::string(17 << 20, '1'));
  expect_data_error([&] { load_csv<float>(c); }, {":1:", "longer than"});
}

}  // namespace
}  // namespace mpiddp::data
