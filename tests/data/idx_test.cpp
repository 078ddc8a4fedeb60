#include "mpiddp/data/idx.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <limits>

#include "fixture_files.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/data/loaded_array.hpp"

namespace mpiddp::data {
namespace {

using testing::bytes_of;
using testing::expect_data_error;
using testing::fixture_dir;
using testing::idx_bytes;
using testing::write_file;
using testing::write_gzip;

constexpr unsigned char kUbyte = 0x08, kInt32 = 0x0C, kFloat32 = 0x0D;

// 3 images of 2 x 2 pixels and their labels, MNIST style.
const std::vector<uint8_t> kPixels = {0, 51, 102, 255, 255, 0, 0, 0, 1, 2, 3, 4};
const std::vector<uint8_t> kLabels = {7, 0, 9};

std::string images() { return idx_bytes(kUbyte, {3, 2, 2}, bytes_of(kPixels)); }
std::string labels() { return idx_bytes(kUbyte, {3}, bytes_of(kLabels)); }

struct Files {
  std::string images, labels;
  IdxConfig config() const { return {images, labels, 10, 1.0 / 255.0}; }
};

Files write_plain(const std::string& image_bytes, const std::string& label_bytes) {
  const std::string dir = fixture_dir();
  Files f{dir + "/images-idx3-ubyte", dir + "/labels-idx1-ubyte"};
  write_file(f.images, image_bytes);
  write_file(f.labels, label_bytes);
  return f;
}

TEST(Idx, PixelsAreScaledToUnitRangeAndFlattened) {
  const auto f = write_plain(images(), labels());
  const auto d = load_idx<float>(f.config());
  EXPECT_EQ(d.samples, 3);
  EXPECT_EQ(d.features, 4);
  EXPECT_EQ(d.classes, 10);
  // 51 / 255 = 0.2, 102 / 255 = 0.4, rounded once to float.
  EXPECT_EQ(d.x[1], 0.2f);
  EXPECT_EQ(d.x[2], 0.4f);
  EXPECT_EQ(d.x[3], 1.0f);
  EXPECT_EQ(d.x[0], 0.0f);
  EXPECT_EQ(d.labels[0], 7);
  EXPECT_EQ(d.labels[2], 9);
}

TEST(Idx, GzipFilesGiveTheSameDataAsPlainOnes) {
  const auto plain = write_plain(images(), labels());
  const std::string dir = std::filesystem::path(plain.images).parent_path().string() + "/";
  write_gzip(dir + "images.gz", images());
  write_gzip(dir + "labels.gz", labels());
  const auto a = load_idx<double>(plain.config());
  const auto b = load_idx<double>({dir + "images.gz", dir + "labels.gz", 10, 1.0 / 255.0});
  ASSERT_EQ(a.samples, b.samples);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(a.x[i], b.x[i]);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(a.labels[i], b.labels[i]);
}

TEST(Idx, BigEndianFloatsAndIntegerLabels) {
  const std::vector<float> values = {1.5f, -2.25f, 3e10f, 0.125f};
  const auto f = write_plain(idx_bytes(kFloat32, {2, 2}, bytes_of(values, /*big_endian=*/true)),
                             idx_bytes(kInt32, {2}, bytes_of(std::vector<int32_t>{4, 1}, true)));
  IdxConfig c = f.config();
  c.scale = 1.0;
  c.classes = 5;
  const auto d = load_idx<float>(c);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(d.x[i], values[i]);
  EXPECT_EQ(d.labels[0], 4);
  EXPECT_EQ(d.labels[1], 1);
}

TEST(Idx, LabelsOutsideClassesNameFileAndSample) {
  const auto f = write_plain(images(), labels());
  IdxConfig c = f.config();
  c.classes = 8;  // label 9 of sample 2 is out of range
  expect_data_error([&] { load_idx<float>(c); }, {f.labels, "sample 2", "label 9", "[0, 8)"});
}

TEST(Idx, NanInFloatImagesNamesTheSample) {
  const std::vector<float> values = {1, 2, 3, std::numeric_limits<float>::quiet_NaN()};
  const auto f = write_plain(idx_bytes(kFloat32, {2, 2}, bytes_of(values, true)),
                             idx_bytes(kUbyte, {2}, bytes_of(std::vector<uint8_t>{0, 1})));
  expect_data_error([&] { load_idx<float>(f.config()); }, {f.images, "sample 1", "NaN"});
}

TEST(Idx, MalformedFilesAreRefusedWithTheReason) {
  const std::string pixels = bytes_of(kPixels);
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {std::string("\x01\x00\x08\x03", 4) + images().substr(4), labels(), "two zero bytes"},
      {idx_bytes(0x0A, {3, 2, 2}, pixels), labels(), "element type code 10"},
      {idx_bytes(kUbyte, {}, ""), labels(), "0 dimensions"},
      {idx_bytes(kUbyte, {3, 2, 2}, pixels + "x"), labels(), "trailing bytes"},
      {idx_bytes(kUbyte, {3, 2, 3}, pixels), labels(), "more than the file can hold"},
      {idx_bytes(kUbyte, {0xffffffff, 0xffffffff, 0xffffffff}, pixels), labels(), "overflow"},
      {images(), idx_bytes(kUbyte, {2}, "\x01\x02"), "has 2 labels"},
      {images(), idx_bytes(kUbyte, {3, 1}, "\x01\x02\x03"), "one-dimensional"},
      {images(), idx_bytes(kFloat32, {3}, bytes_of(std::vector<float>{1, 2, 3}, true)), "must be integers"},
      {idx_bytes(kUbyte, {0, 2, 2}, ""), labels(), "no samples"},
  };
  for (const auto& [image_bytes, label_bytes, reason] : cases) {
    SCOPED_TRACE(reason);
    const auto f = write_plain(image_bytes, label_bytes);
    expect_data_error([&] { load_idx<float>(f.config()); }, {reason});
  }
}

TEST(Idx, HugeClaimedSizeInASmallGzipIsRefusedBeforeAllocating) {
  // 2^32-1 images of 2^16 x 2^16 pixels would be 2^64 bytes; even 2^40 would not fit in a
  // gzip of a few dozen bytes (deflate expands at most ~1032:1).
  const std::string dir = fixture_dir() + "/";
  write_gzip(dir + "images.gz", idx_bytes(kUbyte, {1u << 20, 1024, 1024}, "tiny"));
  write_gzip(dir + "labels.gz", labels());
  expect_data_error([&] { load_idx<float>({dir + "images.gz", dir + "labels.gz", 10, 1.0}); },
                    {dir + "images.gz", "more than the file can hold"});
}

TEST(Idx, ArraysLargerThanPhysicalMemoryAreRefusedUpFront) {
  // A gzip of zeros really can expand 1032:1, so a 25 MB file may honestly claim 25 GB;
  // converting it must fail with a message, not wake the OOM killer.
  EXPECT_NO_THROW(check_fits_in_memory(uint64_t{1} << 20, "small"));
  expect_data_error([] { check_fits_in_memory(uint64_t{1} << 62, "huge.gz"); },
                    {"huge.gz", "MiB in memory", "more than this machine's"});
}

TEST(Idx, EveryTruncationPlainOrGzipIsAnError) {
  const std::string full = images();
  const std::string dir = fixture_dir() + "/";
  write_file(dir + "labels", labels());
  for (size_t n = 0; n < full.size(); ++n) {
    write_file(dir + "images", full.substr(0, n));
    EXPECT_THROW(load_idx<float>({dir + "images", dir + "labels", 10, 1.0}), DataError) << n;
    write_gzip(dir + "images.gz", full.substr(0, n));
    EXPECT_THROW(load_idx<float>({dir + "images.gz", dir + "labels", 10, 1.0}), DataError) << n;
  }
  // A gzip stream cut short: the compressed bytes end before the data does.
  write_gzip(dir + "whole.gz", full);
  const std::string gz = testing::read_file(dir + "whole.gz");
  for (size_t n = 2; n + 1 < gz.size(); ++n) {
    write_file(dir + "cut.gz", gz.substr(0, n));
    EXPECT_THROW(load_idx<float>({dir + "cut.gz", dir + "labels", 10, 1.0}), DataError) << n;
  }
}

TEST(Idx, CorruptGzipDataIsAnError) {
  std::vector<uint8_t> many(4096);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<uint8_t>(i * 7);
  const std::string dir = fixture_dir() + "/";
  write_gzip(dir + "whole.gz", idx_bytes(kUbyte, {64, 8, 8}, bytes_of(many)));
  write_file(dir + "labels", idx_bytes(kUbyte, {64}, std::string(64, '\1')));
  std::string gz = testing::read_file(dir + "whole.gz");
  for (size_t i = 12; i < gz.size() - 8; i += 7) gz[i] = static_cast<char>(gz[i] ^ 0x5a);
  write_file(dir + "bad.gz", gz);
  expect_data_error([&] { load_idx<float>({dir + "bad.gz", dir + "labels", 10, 1.0}); },
                    {dir + "bad.gz"});
}

}  // namespace
}  // namespace mpiddp::data
