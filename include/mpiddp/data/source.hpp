#pragma once
// Where a dataset comes from (the config's data.train / data.eval), and loading it.
// docs/config.md ("Data sources") describes the keys of each source.
#include <cstdint>
#include <string>
#include <vector>

#include "mpiddp/data/augment.hpp"
#include "mpiddp/data/csv.hpp"
#include "mpiddp/data/dataset.hpp"
#include "mpiddp/data/fashion_mnist.hpp"
#include "mpiddp/data/idx.hpp"
#include "mpiddp/data/npy.hpp"
#include "mpiddp/data/synthetic.hpp"
#include "mpiddp/data/text.hpp"
#include "mpiddp/data/tokens.hpp"

namespace mpiddp::data {

struct SourceConfig {
  // synthetic_regression | synthetic_classification | npy | csv | idx | fashion_mnist | text | tokens
  std::string source;
  TextConfig text;
  TokensConfig tokens;
  SyntheticConfig synthetic;
  NpyConfig npy;
  CsvConfig csv;
  IdxConfig idx;
  FashionMnistConfig fashion_mnist;
  // data.train.augment: the transforms of each training batch, in order (data/augment.hpp);
  // empty (the default): none, nothing computed.
  std::vector<AugmentSpec> augment;
};

// Loads (or generates) a dataset, once per rank: every rank holds all of it (files are
// memory-mapped where the format allows) and the sampler picks the samples it touches.
// Synthetic data is seeded by synthetic.seed when set, else by the run seed; the split
// seeds the samples, so a train and an eval split share one task and differ in their
// samples. Every rank generates the same data.
template <typename T>
Dataset<T> load_source(const SourceConfig& config, uint64_t run_seed, const std::string& split);

// The SentencePiece model a source names: the text source's with "sentencepiece", the tokens
// source's "tokenizer"; "" for none.
const std::string& named_tokenizer(const SourceConfig& config);

}  // namespace mpiddp::data
