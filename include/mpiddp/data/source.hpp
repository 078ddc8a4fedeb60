#pragma once
// Where a dataset comes from (the config's data.train / data.eval), and loading it.
#include <cstdint>
#include <string>

#include "mpiddp/data/dataset.hpp"
#include "mpiddp/data/synthetic.hpp"

namespace mpiddp::data {

struct SourceConfig {
  std::string source;  // synthetic_regression | synthetic_classification
  SyntheticConfig synthetic;
};

// Loads (or generates) a dataset. Synthetic data is seeded by synthetic.seed when set, else by
// the run seed; the split seeds the samples, so a train and an eval split share one task and
// differ in their samples. Every rank generates the same data.
template <typename T>
Dataset<T> load_source(const SourceConfig& config, uint64_t run_seed, const std::string& split);

}  // namespace mpiddp::data
