#pragma once
// When a run evaluates, and what it does with the evaluations: eval.*, early_stopping.* and
// the metric names that checkpoint.keep_best and early_stopping.metric take. docs/config.md
// describes every key; docs/log-format.md the eval and early_stop records.
#include <cstdint>
#include <string>
#include <vector>

#include "mpiddp/core/types.hpp"
#include "mpiddp/io/json_reader.hpp"

namespace mpiddp::config {

// eval.*
struct EvaluationConfig {
  int64_t every_steps = 0;  // 0: at the end of each epoch only
  Index max_samples = 0;    // 0: the whole evaluation set; else its first max_samples samples
};

// early_stopping.*: on when the section is given.
struct EarlyStoppingConfig {
  std::string metric;      // "": off
  int64_t patience = 3;    // evaluations in a row without improvement that end the run
  double min_delta = 0.0;  // an improvement must beat the best by more than this
  bool enabled() const { return !metric.empty(); }
};

// The metrics an evaluation can give, in the names of the records' fields.
const std::vector<std::string>& evaluation_metrics();
// Whether a larger value of the metric is better (accuracy) or a smaller one (losses).
bool larger_is_better(const std::string& metric);

// Reads the eval and early_stopping sections of the config root, only when given, so that
// a config without them resolves as before they existed. A ConfigError names the key.
void parse_evaluation_keys(io::JsonSection& root, EvaluationConfig& eval, EarlyStoppingConfig& early_stopping);

}  // namespace mpiddp::config
