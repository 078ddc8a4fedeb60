#include "mpiddp/config/data_source.hpp"

#include <gtest/gtest.h>

#include "../support/config_errors.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/config/config.hpp"

namespace mpiddp::config {
namespace {

// The default experiment with data.train replaced by `source`.
Config with_train_source(const std::string& source) {
  io::Json user = default_experiment();
  user["data"]["train"] = io::Json::parse(source);
  return parse_config(user);
}

std::string source_error_key(const std::string& source) {
  return test::config_error_key([&] { with_train_source(source); });
}

TEST(DataSourceConfig, NpyKeysAndDefaults) {
  const Config c = with_train_source(R"({"source":"npy","features":"x.npy","targets":"y.npy"})");
  EXPECT_EQ(c.train_data.source, "npy");
  EXPECT_EQ(c.train_data.npy.features, "x.npy");
  EXPECT_EQ(c.train_data.npy.targets, "y.npy");
  EXPECT_EQ(c.train_data.npy.classes, 0);
  EXPECT_EQ(c.resolved["data"]["train"]["classes"], 0);
}

TEST(DataSourceConfig, CsvKeysAndDefaults) {
  Config c = with_train_source(R"({"source":"csv","path":"d.csv"})");
  EXPECT_FALSE(c.train_data.csv.header);
  EXPECT_EQ(c.train_data.csv.delimiter, ',');
  ASSERT_EQ(c.train_data.csv.target_columns.size(), 1u);
  EXPECT_EQ(c.train_data.csv.target_columns[0].index, -1);  // the last column
  EXPECT_EQ(c.resolved["data"]["train"]["target_columns"], io::Json::parse("[-1]"));
  c = with_train_source(
      R"({"source":"csv","path":"d.csv","header":true,"delimiter":";","target_columns":[0,"label"],"classes":0})");
  EXPECT_TRUE(c.train_data.csv.header);
  EXPECT_EQ(c.train_data.csv.delimiter, ';');
  EXPECT_EQ(c.train_data.csv.target_columns[0].index, 0);
  EXPECT_EQ(c.train_data.csv.target_columns[1].name, "label");
}

TEST(DataSourceConfig, IdxAndFashionMnist) {
  Config c = with_train_source(R"({"source":"idx","images":"i.gz","labels":"l.gz"})");
  EXPECT_EQ(c.train_data.idx.classes, 10);
  EXPECT_DOUBLE_EQ(c.train_data.idx.scale, 1.0 / 255.0);
  c = with_train_source(R"({"source":"fashion_mnist","split":"test"})");
  EXPECT_EQ(c.train_data.fashion_mnist.split, "test");
  EXPECT_EQ(c.train_data.fashion_mnist.dir, "/usr/share/datasets/fashion-mnist");
  c = with_train_source(R"({"source":"fashion_mnist","split":"train","dir":"/data/fm"})");
  EXPECT_EQ(c.train_data.fashion_mnist.dir, "/data/fm");
}

// A model whose first layer takes token ids reads npy integer features as ids, bounded by
// "classes" (the vocabulary); other sources give values.
Config with_token_model(const std::string& source) {
  io::Json user = default_experiment();
  user["model"] = io::Json::parse(R"({"layers": [{"type": "embedding", "vocab": 65, "dim": 65}]})");
  user["data"]["train"] = io::Json::parse(source);
  return parse_config(user);
}

TEST(DataSourceConfig, TokenIdsForAModelThatTakesThem) {
  const Config c = with_token_model(R"({"source":"npy","features":"x.npy","targets":"y.npy","classes":65})");
  EXPECT_TRUE(c.train_data.npy.token_ids);
  EXPECT_FALSE(with_train_source(R"({"source":"npy","features":"x.npy","targets":"y.npy"})").train_data.npy.token_ids);
  auto key = [](const std::string& source) { return test::config_error_key([&] { with_token_model(source); }); };
  EXPECT_EQ(key(R"({"source":"npy","features":"x.npy","targets":"y.npy"})"), "data.train.classes");
  EXPECT_EQ(key(R"({"source":"csv","path":"d.csv"})"), "data.train.source");
  EXPECT_EQ(key(R"({"source":"synthetic_classification","samples":64})"), "data.train.source");
}

TEST(DataSourceConfig, TextAndTokensKeysAndDefaults) {
  const Config c = with_token_model(R"({"source":"text","path":"input.txt","block":64})");
  EXPECT_EQ(c.train_data.text.path, "input.txt");
  EXPECT_EQ(c.train_data.text.encoding, "chars");
  EXPECT_EQ(c.train_data.text.windows.block, 64);
  EXPECT_EQ(c.train_data.text.windows.stride, 64);  // the block
  EXPECT_EQ(c.resolved["data"]["train"]["range"], io::Json::parse("[0.0, 1.0]"));
  const Config split = with_token_model(R"({"source":"text","path":"t","block":8,"stride":1,"range":[0.9,1],"encoding":"bytes"})");
  EXPECT_EQ(split.train_data.text.windows.stride, 1);
  EXPECT_EQ(split.train_data.text.windows.range_begin, 0.9);
  EXPECT_EQ(split.train_data.text.encoding, "bytes");
  auto key = [](const std::string& source) { return test::config_error_key([&] { with_token_model(source); }); };
  EXPECT_EQ(key(R"({"source":"text","path":"t"})"), "data.train.block");
  EXPECT_EQ(key(R"({"source":"text","block":8})"), "data.train.path");
  EXPECT_EQ(key(R"({"source":"text","path":"t","block":8,"range":[0.5,0.5]})"), "data.train.range");
  EXPECT_EQ(key(R"({"source":"text","path":"t","block":8,"range":[0.5]})"), "data.train.range");
  EXPECT_EQ(key(R"({"source":"text","path":"t","block":8,"encoding":"utf8"})"), "data.train.encoding");
  const Config bin = with_token_model(R"({"source":"tokens","path":"train.bin","vocab":65,"block":8,"header_bytes":1024})");
  EXPECT_EQ(bin.train_data.tokens.vocab, 65);
  EXPECT_EQ(bin.train_data.tokens.header_bytes, 1024);
  EXPECT_EQ(bin.train_data.tokens.windows.block, 8);
  EXPECT_EQ(key(R"({"source":"tokens","path":"t.bin","block":8})"), "data.train.vocab");
  EXPECT_EQ(key(R"({"source":"tokens","path":"t.bin","vocab":65})"), "data.train.block");
  EXPECT_EQ(key(R"({"source":"tokens","path":"t.bin","vocab":65,"block":8,"header_bytes":-1})"), "data.train.header_bytes");
  // Text gives token ids: a model that takes values cannot read it.
  EXPECT_EQ(source_error_key(R"({"source":"text","path":"t","block":8})"), "data.train.source");
  EXPECT_EQ(source_error_key(R"({"source":"tokens","path":"t","vocab":3,"block":8})"), "data.train.source");
}

// With "chars" the ids are a file's own sorted characters: evaluation must read the same file
// (another range of it) with the same encoding.
TEST(DataSourceConfig, TextEvaluationNumbersCharactersAsTraining) {
  auto with_eval = [](const std::string& train, const std::string& eval) {
    io::Json user = default_experiment();
    user["model"] = io::Json::parse(R"({"layers": [{"type": "embedding", "vocab": 256, "dim": 4}]})");
    user["data"]["train"] = io::Json::parse(train);
    user["data"]["eval"] = io::Json::parse(eval);
    return parse_config(user);
  };
  const std::string train = R"({"source":"text","path":"a.txt","block":8,"range":[0,0.9]})";
  EXPECT_EQ(with_eval(train, R"({"source":"text","path":"a.txt","block":8,"range":[0.9,1]})").eval_data->text.path,
            "a.txt");
  EXPECT_EQ(test::config_error_key([&] { with_eval(train, R"({"source":"text","path":"b.txt","block":8})"); }),
            "data.eval.path");
  EXPECT_EQ(test::config_error_key(
                [&] { with_eval(train, R"({"source":"text","path":"a.txt","block":8,"encoding":"bytes"})"); }),
            "data.eval.path");
  const std::string bytes = R"({"source":"text","path":"a.txt","block":8,"encoding":"bytes"})";
  EXPECT_EQ(with_eval(bytes, R"({"source":"text","path":"b.txt","block":8,"encoding":"bytes"})").eval_data->text.path,
            "b.txt");  // bytes are the same ids in every file
}

TEST(DataSourceConfig, EachErrorNamesItsKey) {
  EXPECT_EQ(source_error_key(R"({"source":"parquet"})"), "data.train.source");
  EXPECT_EQ(source_error_key(R"({"source":"npy","targets":"y.npy"})"), "data.train.features");
  EXPECT_EQ(source_error_key(R"({"source":"npy","features":"x.npy"})"), "data.train.targets");
  EXPECT_EQ(source_error_key(R"({"source":"npy","features":"","targets":"y.npy"})"), "data.train.features");
  EXPECT_EQ(source_error_key(R"({"source":"npy","features":"x","targets":"y","classes":1})"), "data.train.classes");
  EXPECT_EQ(source_error_key(R"({"source":"npy","features":"x","targets":"y","path":"p"})"), "data.train.path");
  EXPECT_EQ(source_error_key(R"({"source":"csv"})"), "data.train.path");
  EXPECT_EQ(source_error_key(R"({"source":"csv","path":"p","target_columns":[]})"), "data.train.target_columns");
  EXPECT_EQ(source_error_key(R"({"source":"csv","path":"p","target_columns":[1.5]})"), "data.train.target_columns");
  EXPECT_EQ(source_error_key(R"({"source":"csv","path":"p","delimiter":";;"})"), "data.train.delimiter");
  EXPECT_EQ(source_error_key(R"({"source":"idx","images":"i"})"), "data.train.labels");
  EXPECT_EQ(source_error_key(R"({"source":"fashion_mnist"})"), "data.train.split");
  EXPECT_EQ(source_error_key(R"({"source":"fashion_mnist","split":"validation"})"), "data.train.split");
  EXPECT_EQ(source_error_key(R"({"source":"fashion_mnist","split":"test","samples":10})"), "data.train.samples");
}

}  // namespace
}  // namespace mpiddp::config
