#include "mpiddp/config/data_source.hpp"

#include <limits>

#include "mpiddp/core/error.hpp"

namespace mpiddp::config {

namespace {

using io::Json;
using io::JsonSection;

constexpr int64_t kMaxClasses = 1 << 20;

std::string required_text(JsonSection& s, const std::string& key, const std::string& example) {
  if (!s.has(key)) throw ConfigError(s.key_path(key), "required key is missing; e.g. " + example);
  const std::string value = s.text(key, "");
  if (value.empty()) throw ConfigError(s.key_path(key), "must not be empty");
  return value;
}

// classes: 0 means regression targets; a classifier needs at least two classes.
Index classes(JsonSection& s, int64_t fallback) {
  const Index n = s.integer("classes", fallback, 0, kMaxClasses);
  if (n == 1) throw ConfigError(s.key_path("classes"), "a classifier needs at least 2 classes");
  return n;
}

void parse_synthetic(JsonSection& s, data::SyntheticConfig& syn) {
  syn.samples = s.integer("samples", 256, 1, io::kMaxConfigCount);
  syn.features = s.integer("features", 6, 1, 1 << 24);
  syn.seed = static_cast<uint64_t>(s.integer("seed", 0, 0, std::numeric_limits<int64_t>::max()));
  if (syn.source == "synthetic_regression") {
    syn.outputs = s.integer("outputs", 1, 1, 1 << 20);
    syn.noise = s.number("noise", 0.1, 0.0, 1e6);
  } else {
    syn.classes = s.integer("classes", 10, 2, kMaxClasses);
    syn.generator = s.choice("generator", "teacher", {"teacher", "blobs"});
    if (syn.generator == "blobs") syn.spread = s.number("spread", 3.0, 0.0, 1e6);
  }
}

void parse_npy(JsonSection& s, data::NpyConfig& npy) {
  npy.features = required_text(s, "features", "\"x.npy\"");
  npy.targets = required_text(s, "targets", "\"y.npy\"");
  npy.classes = classes(s, 0);
}

// range: [a, b], fractions of the file with 0 <= a < b <= 1.
void parse_range(JsonSection& s, double& begin, double& end) {
  const Json* range = s.raw("range");
  if (range) {
    const bool pair = range->is_array() && range->size() == 2 && (*range)[0].is_number() && (*range)[1].is_number();
    if (!pair) throw ConfigError(s.key_path("range"), "expected two fractions of the file like [0, 0.9]");
    begin = (*range)[0].get<double>();
    end = (*range)[1].get<double>();
    if (!(begin >= 0.0 && begin < end && end <= 1.0))
      throw ConfigError(s.key_path("range"), "expected 0 <= a < b <= 1, got [" + range->at(0).dump() + ", " +
                                                 range->at(1).dump() + "]");
  }
  s.put("range", Json::array({begin, end}));
}

// block, stride and range: the windows of the text and tokens sources.
void parse_windows(JsonSection& s, data::WindowConfig& windows) {
  if (!s.has("block")) throw ConfigError(s.key_path("block"), "required key is missing: the positions per sample, T");
  windows.block = s.integer("block", 0, 1, 1 << 20);
  windows.stride = s.integer("stride", windows.block, 1, 1 << 20);
  parse_range(s, windows.range_begin, windows.range_end);
}

void parse_text(JsonSection& s, data::TextConfig& text) {
  text.path = required_text(s, "path", "\"input.txt\"");
  text.encoding = s.choice("encoding", "chars", {"chars", "bytes", "sentencepiece"});
  if (text.encoding == "sentencepiece") {
    text.tokenizer = required_text(s, "tokenizer", "\"kjv_bpe.model\", the SentencePiece model `mpiddp tokenize` writes");
  } else if (s.has("tokenizer")) {
    throw ConfigError(s.key_path("tokenizer"), "a tokenizer model is for \"encoding\": \"sentencepiece\"; with \"" +
                                                   text.encoding + "\" the bytes are the tokens");
  }
  parse_windows(s, text.windows);
}

void parse_tokens(JsonSection& s, data::TokensConfig& tokens) {
  tokens.path = required_text(s, "path", "\"train.bin\"");
  if (s.has("tokenizer")) tokens.tokenizer = required_text(s, "tokenizer", "\"kjv_bpe.model\"");
  if (!s.has("vocab") && tokens.tokenizer.empty())
    throw ConfigError(s.key_path("vocab"), "required key is missing: the vocabulary, which bounds the ids (or a "
                                           "\"tokenizer\", whose vocabulary it then is)");
  if (s.has("vocab")) tokens.vocab = s.integer("vocab", 0, 1, 1 << 24);
  tokens.header_bytes = s.integer("header_bytes", 0, 0, 1 << 30);
  parse_windows(s, tokens.windows);
}

std::vector<data::CsvColumn> parse_target_columns(JsonSection& s) {
  const Json* value = s.raw("target_columns");
  const std::string path = s.key_path("target_columns");
  const char* expected = "expected a non-empty list of column indices (0-based, -1 = last) or "
                         "header names, like [-1] or [\"price\"]";
  if (!value) {
    s.put("target_columns", Json::array({-1}));
    return {data::CsvColumn{}};
  }
  if (!value->is_array() || value->empty()) throw ConfigError(path, expected);
  std::vector<data::CsvColumn> columns;
  for (const Json& item : *value) {
    data::CsvColumn c;
    if (item.is_number_integer()) {
      c.index = item.get<Index>();
    } else if (item.is_string() && !item.get<std::string>().empty()) {
      c.name = item.get<std::string>();
    } else {
      throw ConfigError(path, std::string(expected) + "; got " + item.dump());
    }
    columns.push_back(c);
  }
  s.put("target_columns", *value);
  return columns;
}

void parse_csv(JsonSection& s, data::CsvConfig& csv) {
  csv.path = required_text(s, "path", "\"data.csv\"");
  csv.header = s.boolean("header", false);
  const std::string delimiter = s.text("delimiter", ",");
  if (delimiter.size() != 1 || delimiter == "\"" || delimiter == "\n")
    throw ConfigError(s.key_path("delimiter"), "expected one character like \",\" or \";\"");
  csv.delimiter = delimiter[0];
  csv.target_columns = parse_target_columns(s);
  csv.classes = classes(s, 0);
}

void parse_idx(JsonSection& s, data::IdxConfig& idx) {
  idx.images = required_text(s, "images", "\"train-images-idx3-ubyte.gz\"");
  idx.labels = required_text(s, "labels", "\"train-labels-idx1-ubyte.gz\"");
  idx.classes = s.integer("classes", 10, 2, kMaxClasses);
  idx.scale = s.number("scale", 1.0 / 255.0, -1e30, 1e30);
}

void parse_fashion_mnist(JsonSection& s, data::FashionMnistConfig& f) {
  if (!s.has("split")) throw ConfigError(s.key_path("split"), "required key is missing; \"train\" or \"test\"");
  f.split = s.choice("split", "train", {"train", "test"});
  f.dir = s.text("dir", data::kFashionMnistDir);
}

// augment: a list of {"type": NAME, its keys}, applied in order to each training batch; absent
// (or empty) is none and leaves the resolved config as it was. Evaluation sees the data as it
// is, so data.eval's is refused.
std::vector<data::AugmentSpec> parse_augment(JsonSection& s) {
  const std::string path = s.key_path("augment");
  const Json* list = s.raw("augment");
  if (!list) return {};
  if (path != "data.train.augment")
    throw ConfigError(path, "augmentation is for the training data only (data.train.augment); "
                            "evaluation reads its samples as they are");
  if (!list->is_array())
    throw ConfigError(path, "expected a list of transforms like [{\"type\": \"random_crop\", \"padding\": 4}, "
                            "{\"type\": \"horizontal_flip\", \"p\": 0.5}, {\"type\": \"gaussian_noise\", "
                            "\"std\": 0.1}], got " + list->dump(-1, ' ', false, Json::error_handler_t::replace));
  std::vector<data::AugmentSpec> specs;
  Json resolved = Json::array();
  for (size_t i = 0; i < list->size(); ++i) {
    JsonSection item(&(*list)[i], path + "[" + std::to_string(i) + "]");
    const std::string type = item.required_choice("type", data::augment_type_names());
    data::AugmentSpec spec;
    if (type == "random_crop") {
      if (!item.has("padding"))
        throw ConfigError(item.key_path("padding"), "required key is missing: the zeros added on each side, like 4");
      spec.type = data::AugmentType::kRandomCrop;
      spec.padding = item.integer("padding", 0, 0, data::kMaxAugmentPadding);
    } else if (type == "horizontal_flip") {
      spec.type = data::AugmentType::kHorizontalFlip;
      spec.p = item.number("p", 0.5, 0.0, 1.0);
    } else {
      if (!item.has("std"))
        throw ConfigError(item.key_path("std"), "required key is missing: the noise's standard deviation, like 0.1");
      spec.type = data::AugmentType::kGaussianNoise;
      spec.std = item.number("std", 0.0, 0.0, 1e6);
    }
    item.finish();
    resolved.push_back(item.resolved());
    specs.push_back(spec);
  }
  s.put("augment", std::move(resolved));
  return specs;
}

}  // namespace

data::SourceConfig parse_data_source(JsonSection& s, InputKind model_input) {
  data::SourceConfig d;
  d.source = s.required_choice("source", {"synthetic_regression", "synthetic_classification",
                                          "npy", "csv", "idx", "fashion_mnist", "text", "tokens"});
  // Any source may name it; whether the data are images is known when they are loaded (train::BatchPipeline).
  d.augment = parse_augment(s);
  if (d.source == "text" || d.source == "tokens") {
    if (model_input != InputKind::kTokenIds)
      throw ConfigError(s.key_path("source"), "\"" + d.source + "\" gives token ids, and the model's first layer "
                                              "takes values; start the model with an embedding");
    if (d.source == "text") parse_text(s, d.text);
    else parse_tokens(s, d.tokens);
    return d;
  }
  if (model_input == InputKind::kTokenIds) {
    if (d.source != "npy")
      throw ConfigError(s.key_path("source"), "the model's first layer takes token ids, which come from "
                                              "\"text\", \"tokens\" or \"npy\" integer features; \"" + d.source +
                                              "\" gives values");
    parse_npy(s, d.npy);
    if (d.npy.classes == 0)
      throw ConfigError(s.key_path("classes"), "required for token ids: the vocabulary, which bounds the ids "
                                               "and the targets");
    d.npy.token_ids = true;
    return d;
  }
  if (d.source == "npy") {
    parse_npy(s, d.npy);
  } else if (d.source == "csv") {
    parse_csv(s, d.csv);
  } else if (d.source == "idx") {
    parse_idx(s, d.idx);
  } else if (d.source == "fashion_mnist") {
    parse_fashion_mnist(s, d.fashion_mnist);
  } else {
    d.synthetic.source = d.source;
    parse_synthetic(s, d.synthetic);
  }
  return d;
}

}  // namespace mpiddp::config
