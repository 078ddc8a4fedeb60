#pragma once
// Synthetic datasets generated from a seed, identical on every rank whatever the world size.
#include <cstdint>
#include <string>

#include "mpiddp/data/dataset.hpp"

namespace mpiddp::data {

struct SyntheticConfig {
  std::string source;        // synthetic_regression | synthetic_classification
  Index samples = 256;
  Index features = 6;
  Index outputs = 1;         // regression
  double noise = 0.1;        // regression: targets = X w + noise * N(0, 1)
  Index classes = 10;        // classification
  std::string generator = "teacher";  // classification: teacher | blobs
  double spread = 3.0;       // blobs: class centres ~ N(0, spread^2)
  uint64_t seed = 0;         // 0: derived from the run seed and the split
};

// synthetic_regression: X ~ N(0,1) (samples, features), w ~ N(0,1) (features, outputs),
//   targets = X w + noise * N(0,1).
// synthetic_classification/teacher: labels = argmax of a fixed random tanh network
//   features -> 32 -> classes applied to X ~ N(0,1).
// synthetic_classification/blobs: label uniform, x = centre[label] + N(0,1).
// task_seed draws the task (w, the teacher, the centres); sample_seed draws the samples.
// A train and an eval split share the task and differ in the samples.
template <typename T>
Dataset<T> make_synthetic(const SyntheticConfig& config, uint64_t task_seed, uint64_t sample_seed);

}  // namespace mpiddp::data
