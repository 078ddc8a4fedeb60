#include "mpiddp/data/source.hpp"

#include <gtest/gtest.h>

#include "fixture_files.hpp"
#include "mpiddp/config/config.hpp"

namespace mpiddp::data {
namespace {

using testing::bytes_of;
using testing::fixture_dir;
using testing::idx_bytes;
using testing::write_file;
using testing::write_gzip;

// A data.train section as a user writes it, parsed like a real config, then loaded.
template <typename T>
Dataset<T> load_from_config(const std::string& source_json) {
  io::Json user = config::default_experiment();
  user["data"]["train"] = io::Json::parse(source_json);
  const config::Config config = config::parse_config(user);
  return load_source<T>(config.train_data, config.seed, "train");
}

TEST(Source, CsvThroughTheConfig) {
  const std::string path = fixture_dir() + "/d.csv";
  write_file(path, "label,a,b\n1,0.5,0.25\n0,2,4\n");
  const auto d = load_from_config<double>(R"({"source":"csv","path":")" + path +
                                          R"(","header":true,"target_columns":["label"],"classes":2})");
  EXPECT_EQ(d.samples, 2);
  EXPECT_EQ(d.features, 2);
  EXPECT_EQ(d.labels[0], 1);
  EXPECT_EQ(d.x[3], 4.0);
}

TEST(Source, GzipIdxThroughTheConfig) {
  const std::string dir = fixture_dir();
  write_gzip(dir + "/i.gz", idx_bytes(0x08, {2, 1, 3}, bytes_of(std::vector<uint8_t>{0, 10, 20, 30, 40, 250})));
  write_file(dir + "/l", idx_bytes(0x08, {2}, bytes_of(std::vector<uint8_t>{3, 4})));
  const auto d = load_from_config<float>(R"({"source":"idx","images":")" + dir + R"(/i.gz","labels":")" +
                                         dir + R"(/l","classes":5,"scale":0.1})");
  EXPECT_EQ(d.samples, 2);
  EXPECT_EQ(d.features, 3);
  EXPECT_EQ(d.classes, 5);
  EXPECT_EQ(d.x[5], 25.0f);  // 250 * 0.1
  EXPECT_EQ(d.labels[1], 4);
}

}  // namespace
}  // namespace mpiddp::data
