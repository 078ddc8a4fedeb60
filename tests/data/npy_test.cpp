#include "mpiddp/data/npy.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "fixture_files.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/data/loaded_array.hpp"

namespace mpiddp::data {
namespace {

using testing::bytes_of;
using testing::expect_data_error;
using testing::fixture_dir;
using testing::npy_bytes;
using testing::write_file;

struct NpyFiles {
  std::string dir, x, y;
  NpyConfig config() const { return {x, y, 0}; }
};

NpyFiles write_pair(const std::string& x_bytes, const std::string& y_bytes) {
  NpyFiles f{fixture_dir(), "", ""};
  f.x = f.dir + "/x.npy";
  f.y = f.dir + "/y.npy";
  write_file(f.x, x_bytes);
  write_file(f.y, y_bytes);
  return f;
}

const std::vector<float> kX = {1.5f, -2.0f, 0.25f, 4.0f, -0.5f, 8.0f};  // [3, 2]
const std::vector<float> kY = {10.0f, 20.0f, 30.0f};                    // [3]

TEST(Npy, Float32RegressionLoadsAsStored) {
  const auto f = write_pair(npy_bytes("<f4", "(3, 2)", bytes_of(kX)), npy_bytes("<f4", "(3,)", bytes_of(kY)));
  const auto d = load_npy<float>(f.config());
  EXPECT_EQ(d.samples, 3);
  EXPECT_EQ(d.features, 2);
  EXPECT_EQ(d.outputs, 1);
  EXPECT_FALSE(d.is_classification());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(d.x[i], kX[i]);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(d.y[i], kY[i]);
}

TEST(Npy, MatchingDtypeIsMappedOtherDtypesAreConverted) {
  const std::string dir = fixture_dir();
  write_file(dir + "/f4.npy", npy_bytes("<f4", "(3, 2)", bytes_of(kX)));
  InputFile file(dir + "/f4.npy");
  const NpyHeader h = read_npy_header(file);
  EXPECT_EQ(h.data_offset, 128u);  // 10 bytes of prefix + a dict padded to a multiple of 64
  const auto as_float = load_values<float>(file, h.data_offset, h.encoding, h.elements, 2, 1.0);
  EXPECT_TRUE(as_float.mapped);
  const auto as_double = load_values<double>(file, h.data_offset, h.encoding, h.elements, 2, 1.0);
  EXPECT_FALSE(as_double.mapped);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(as_float.data[i], kX[i]);
    EXPECT_EQ(as_double.data[i], static_cast<double>(kX[i]));
  }
}

TEST(Npy, EveryDtypeAndVersionConverts) {
  // The same 6 values in each supported dtype; versions 2.0 and 3.0 differ only by a
  // 4-byte header length.
  const std::vector<std::pair<std::string, std::string>> encoded = {
      {"<f8", bytes_of(std::vector<double>{0, 1, 2, 3, 4, 255})},
      {"<i4", bytes_of(std::vector<int32_t>{0, 1, 2, 3, 4, 255})},
      {"<i8", bytes_of(std::vector<int64_t>{0, 1, 2, 3, 4, 255})},
      {"|u1", bytes_of(std::vector<uint8_t>{0, 1, 2, 3, 4, 255})},
      {"<u2", bytes_of(std::vector<uint16_t>{0, 1, 2, 3, 4, 255})}};
  for (int version = 1; version <= 3; ++version)
    for (const auto& [descr, data] : encoded) {
      SCOPED_TRACE(descr + " v" + std::to_string(version));
      const auto f = write_pair(npy_bytes(descr, "(2, 3)", data, version),
                                npy_bytes(descr, "(2,)", data.substr(0, 2 * data.size() / 6), version));
      const auto d = load_npy<double>(f.config());
      EXPECT_EQ(d.features, 3);
      const double expected[6] = {0, 1, 2, 3, 4, 255};
      for (int i = 0; i < 6; ++i) EXPECT_EQ(d.x[i], expected[i]);
      EXPECT_EQ(d.y[1], 1.0);
    }
}

TEST(Npy, TrailingDimensionsFlattenAndWideTargetsGiveOutputs) {
  std::vector<float> x(2 * 2 * 3), y(2 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(100 + i);
  const auto f = write_pair(npy_bytes("<f4", "(2, 2, 3)", bytes_of(x)), npy_bytes("<f4", "(2, 4)", bytes_of(y)));
  const auto d = load_npy<float>(f.config());
  EXPECT_EQ(d.samples, 2);
  EXPECT_EQ(d.features, 6);  // 2 * 3
  EXPECT_EQ(d.outputs, 4);
  EXPECT_EQ(d.x[7], 7.0f);   // sample 1, feature 1
  EXPECT_EQ(d.y[5], 105.0f); // sample 1, output 1
  EXPECT_EQ(d.shape, (std::vector<Index>{2, 3}));  // the per-sample shape the file gives
}

TEST(Npy, ImagesKeepTheirPerSampleShape) {
  // [N, C, H, W] = [2, 3, 2, 2]: each sample is (3, 2, 2), stored flat in the same order.
  std::vector<float> x(2 * 3 * 2 * 2), y = {0, 1};
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  const auto f = write_pair(npy_bytes("<f4", "(2, 3, 2, 2)", bytes_of(x)), npy_bytes("<f4", "(2,)", bytes_of(y)));
  const auto d = load_npy<float>(f.config());
  EXPECT_EQ(d.features, 12);
  EXPECT_EQ(d.shape, (std::vector<Index>{3, 2, 2}));
  EXPECT_EQ(d.x[12 + 4], 16.0f);  // sample 1, channel 1, row 0, column 0
  // A flat [N, F] file has no shape of its own: (features) is taken.
  const auto flat = write_pair(npy_bytes("<f4", "(2, 12)", bytes_of(x)), npy_bytes("<f4", "(2,)", bytes_of(y)));
  EXPECT_TRUE(load_npy<float>(flat.config()).shape.empty());
}

TEST(Npy, IntegerLabelsForClassification) {
  const auto f = write_pair(npy_bytes("<f4", "(3, 2)", bytes_of(kX)),
                            npy_bytes("<i8", "(3,)", bytes_of(std::vector<int64_t>{2, 0, 1})));
  NpyConfig c = f.config();
  c.classes = 3;
  const auto d = load_npy<float>(c);
  ASSERT_TRUE(d.is_classification());
  EXPECT_EQ(d.classes, 3);
  EXPECT_EQ(d.labels[0], 2);
  EXPECT_EQ(d.labels[1], 0);
  EXPECT_EQ(d.labels[2], 1);
}

TEST(Npy, LabelOutsideClassesNamesFileAndSample) {
  const auto f = write_pair(npy_bytes("<f4", "(3, 2)", bytes_of(kX)),
                            npy_bytes("<i4", "(3,)", bytes_of(std::vector<int32_t>{0, 1, 3})));
  NpyConfig c = f.config();
  c.classes = 3;
  expect_data_error([&] { load_npy<float>(c); }, {f.y, "sample 2", "label 3", "[0, 3)"});
  const auto g = write_pair(npy_bytes("<f4", "(3, 2)", bytes_of(kX)),
                            npy_bytes("<i8", "(3,)", bytes_of(std::vector<int64_t>{0, -1, 1})));
  c = g.config();
  c.classes = 3;
  expect_data_error([&] { load_npy<float>(c); }, {"sample 1", "label -1"});
}

// Token data: integer features [N, T] are token ids, kept as integers (no float copy), and
// targets [N, T] a class per position.
TEST(Npy, TokenIdsStayIntegersWithAClassPerPosition) {
  const auto f = write_pair(npy_bytes("|u1", "(2, 3)", std::string("\x04\x00\x02\x01\x01\x03", 6)),
                            npy_bytes("<i8", "(2, 3)", bytes_of(std::vector<int64_t>{0, 2, 1, 1, 3, 4})));
  NpyConfig c = f.config();
  c.classes = 5;
  c.token_ids = true;
  const auto d = load_npy<float>(c);
  EXPECT_EQ(d.input_kind(), InputKind::kTokenIds);
  EXPECT_EQ(d.x, nullptr);
  EXPECT_EQ(d.vocabulary, 5);
  EXPECT_EQ(d.features, 3);
  EXPECT_EQ(d.target_kind(), TargetKind::kClassPerPosition);
  EXPECT_EQ(d.label_positions, 3);
  EXPECT_EQ(d.target_width(), 15);  // 5 classes at each of 3 positions
  EXPECT_EQ(std::vector<int32_t>(d.token_ids, d.token_ids + 6), (std::vector<int32_t>{4, 0, 2, 1, 1, 3}));
  EXPECT_EQ(std::vector<int32_t>(d.labels, d.labels + 6), (std::vector<int32_t>{0, 2, 1, 1, 3, 4}));
  // The same files without token_ids: values, and the class per position still.
  c.token_ids = false;
  const auto values = load_npy<float>(c);
  EXPECT_EQ(values.input_kind(), InputKind::kValues);
  EXPECT_EQ(values.x[0], 4.0f);
}

// GPT-2's 50,257 tokens need uint16, as nanoGPT's prepare.py stores them: ids above 255 and
// up to 65,535 stay exact.
TEST(Npy, Uint16TokenIdsKeepTheirValues) {
  const std::vector<uint16_t> ids = {50256, 0, 300, 65535, 7, 50000};
  const auto f = write_pair(npy_bytes("<u2", "(2, 3)", bytes_of(ids)), npy_bytes("<u2", "(2, 3)", bytes_of(ids)));
  NpyConfig c = f.config();
  c.classes = 65536;
  c.token_ids = true;
  const auto d = load_npy<float>(c);
  EXPECT_EQ(std::vector<int32_t>(d.token_ids, d.token_ids + 6), (std::vector<int32_t>{50256, 0, 300, 65535, 7, 50000}));
  EXPECT_EQ(std::vector<int32_t>(d.labels, d.labels + 6), (std::vector<int32_t>{50256, 0, 300, 65535, 7, 50000}));
  c.classes = 50257;  // GPT-2's vocabulary: 65535 at sample 1, position 0 lies outside it
  expect_data_error([&] { load_npy<float>(c); }, {f.x, "sample 1 (0-based), position 0,", "token id 65535", "[0, 50257)"});
}

TEST(Npy, TokenIdOutsideTheVocabularyNamesFileSampleAndPosition) {
  const auto f = write_pair(npy_bytes("<i4", "(2, 2)", bytes_of(std::vector<int32_t>{0, 1, 2, 5})),
                            npy_bytes("<i4", "(2, 2)", bytes_of(std::vector<int32_t>{1, 2, 0, 1})));
  NpyConfig c = f.config();
  c.classes = 5;
  c.token_ids = true;
  expect_data_error([&] { load_npy<float>(c); }, {f.x, "sample 1 (0-based), position 1,", "token id 5", "[0, 5)"});
  const auto g = write_pair(npy_bytes("<i4", "(2, 2)", bytes_of(std::vector<int32_t>{0, 1, 2, 3})),
                            npy_bytes("<i4", "(2, 2)", bytes_of(std::vector<int32_t>{1, 2, -1, 1})));
  c = g.config();
  c.classes = 5;
  c.token_ids = true;
  expect_data_error([&] { load_npy<float>(c); }, {g.y, "sample 1 (0-based), position 0,", "class label -1"});
  const auto h = write_pair(npy_bytes("<f4", "(3, 2)", bytes_of(kX)), npy_bytes("<i4", "(3, 2)", bytes_of(std::vector<int32_t>(6, 0))));
  c = h.config();
  c.classes = 5;
  c.token_ids = true;
  expect_data_error([&] { load_npy<float>(c); }, {h.x, "token ids are stored as float32", "must be integers"});
  const auto w = write_pair(npy_bytes("<i4", "(2, 2)", bytes_of(std::vector<int32_t>{0, 1, 2, 3})),
                            npy_bytes("<i4", "(2, 3)", bytes_of(std::vector<int32_t>(6, 0))));
  c = w.config();
  c.classes = 5;
  expect_data_error([&] { load_npy<float>(c); }, {w.y, "[samples, 2] (one per position", "got (2, 3)"});
}

TEST(Npy, FloatLabelsAreRefused) {
  const auto f = write_pair(npy_bytes("<f4", "(3, 2)", bytes_of(kX)), npy_bytes("<f4", "(3,)", bytes_of(kY)));
  NpyConfig c = f.config();
  c.classes = 40;
  expect_data_error([&] { load_npy<float>(c); }, {f.y, "float32", "must be integers"});
}

TEST(Npy, NanOrInfNamesFileAndSample) {
  auto x = kX;
  x[3] = std::numeric_limits<float>::quiet_NaN();  // sample 1
  auto f = write_pair(npy_bytes("<f4", "(3, 2)", bytes_of(x)), npy_bytes("<f4", "(3,)", bytes_of(kY)));
  expect_data_error([&] { load_npy<float>(f.config()); }, {f.x, "sample 1", "NaN"});
  expect_data_error([&] { load_npy<double>(f.config()); }, {f.x, "sample 1", "NaN"});  // converted path
  auto y = kY;
  y[2] = -std::numeric_limits<float>::infinity();
  f = write_pair(npy_bytes("<f4", "(3, 2)", bytes_of(kX)), npy_bytes("<f4", "(3,)", bytes_of(y)));
  expect_data_error([&] { load_npy<float>(f.config()); }, {f.y, "sample 2", "Inf"});
  // A float64 value beyond float32's range becomes Inf when converted: also refused.
  f = write_pair(npy_bytes("<f8", "(3,)", bytes_of(std::vector<double>{1, 1e300, 2})),
                 npy_bytes("<f4", "(3,)", bytes_of(kY)));
  expect_data_error([&] { load_npy<float>(f.config()); }, {f.x, "sample 1", "Inf"});
}

TEST(Npy, MismatchedSampleCountsAreAnError) {
  const auto f = write_pair(npy_bytes("<f4", "(3, 2)", bytes_of(kX)),
                            npy_bytes("<f4", "(2,)", bytes_of(std::vector<float>{1, 2})));
  expect_data_error([&] { load_npy<float>(f.config()); }, {f.y, "2 samples", "has 3"});
}

TEST(Npy, MalformedHeadersAreRefusedWithTheReason) {
  const std::string data = bytes_of(kX);
  const std::string dir = fixture_dir();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"NUMPYZ\x01\x01\x02\x01{}  ", "magic"},
      {npy_bytes("<f4", "(3, 2)", data).replace(6, 1, "\x04"), "version 4"},
      {npy_bytes(">f4", "(3, 2)", data), "big-endian"},
      {npy_bytes("<f2", "(3, 2)", data.substr(0, 12)), "unsupported dtype '<f2'"},
      {npy_bytes("<c8", "(3, 2)", data), "unsupported dtype"},
      {npy_bytes("<f4", "(3, 2)", data, 1, /*fortran=*/true), "Fortran order"},
      {npy_bytes("<f4", "(3, 2)", data + "xx"), "trailing bytes"},
      {npy_bytes("<f4", "(3, 3)", data), "truncated"},
      {npy_bytes("<f4", "(4294967296, 4294967296)", data), "overflows"},
      {npy_bytes("<f4", "(99999999999999999999999,)", data), "too large"},
      {npy_bytes("<f4", "[3, 2]", data), "malformed .npy header"},
      {npy_bytes("<f4", "(3, 2", data), "malformed .npy header"},
      {npy_bytes("<f4", "(3, -2)", data), "malformed .npy header"},
      {std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff", 12) + data, "over the limit"},
      {std::string("\x93NUMPY\x01\x00\xff\x00", 10) + "{}", "truncated"},
      {std::string("\x93NUMPY\x01\x00\x02\x00{}", 12), "no 'descr'"},
      {std::string("\x93NUMPY\x01\x00\x0b\x00{'descr':1}", 21), "malformed"},
  };
  for (const auto& [bytes, reason] : cases) {
    write_file(dir + "/bad.npy", bytes);
    SCOPED_TRACE(reason);
    expect_data_error([&] { read_npy_header(InputFile(dir + "/bad.npy")); }, {dir + "/bad.npy", reason});
  }
}

TEST(Npy, EveryTruncationIsAnErrorNotACrash) {
  const std::string full = npy_bytes("<f4", "(3, 2)", bytes_of(kX));
  const std::string dir = fixture_dir();
  write_file(dir + "/y.npy", npy_bytes("<f4", "(3,)", bytes_of(kY)));
  for (size_t n = 0; n < full.size(); ++n) {
    write_file(dir + "/x.npy", full.substr(0, n));
    EXPECT_THROW(load_npy<float>({dir + "/x.npy", dir + "/y.npy", 0}), DataError) << n << " bytes";
  }
}

TEST(Npy, CorruptedHeaderBytesNeverCrash) {
  // Every header byte set to a few hostile values: the load succeeds or throws DataError.
  const std::string full = npy_bytes("<f4", "(3, 2)", bytes_of(kX));
  const std::string dir = fixture_dir();
  write_file(dir + "/y.npy", npy_bytes("<f4", "(3,)", bytes_of(kY)));
  int refused = 0;
  for (size_t i = 0; i < 64; ++i)
    for (unsigned char value : {0x00, 0x27, 0x29, 0x39, 0x7f, 0xff}) {
      std::string bytes = full;
      bytes[i] = static_cast<char>(value);
      write_file(dir + "/x.npy", bytes);
      try {
        const auto d = load_npy<float>({dir + "/x.npy", dir + "/y.npy", 0});
        EXPECT_EQ(d.samples, 3);
      } catch (const DataError&) {
        ++refused;
      }
    }
  EXPECT_GT(refused, 100);
}

TEST(Npy, MissingFileNamesIt) {
  expect_data_error([] { load_npy<float>({"/nonexistent/x.npy", "/nonexistent/y.npy", 0}); },
                    {"/nonexistent/x.npy", "cannot open"});
}

}  // namespace
}  // namespace mpiddp::data
