#pragma once
// An in-memory (or memory-mapped) dataset, read-only once built. Every rank holds the
// whole dataset; the sampler decides which samples a rank touches.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/core/target_kind.hpp"
#include "mpiddp/core/types.hpp"

namespace mpiddp::data {

template <typename T>
struct Dataset {
  std::string name;         // where it came from, for messages: a file or "synthetic_regression"
  Index samples = 0;
  Index features = 0;
  // The shape of one sample as the file gives it, without the sample dimension: npy
  // [N, C, H, W] gives (C, H, W); IDX images [N, H, W] give (1, H, W), one channel. Empty
  // for flat sources (csv, synthetic, npy [N, F]): then the shape is (features).
  std::vector<Index> shape;
  Index outputs = 0;        // regression target width; 0 for classification
  Index classes = 0;        // > 0 for classification
  const T* x = nullptr;     // (features, samples): sample i is the contiguous column i
  const T* y = nullptr;     // (outputs, samples), regression only
  const int32_t* labels = nullptr;  // (samples), classification only
  std::shared_ptr<const void> storage;  // keeps x, y and labels alive (vectors or a mapping)

  bool is_classification() const { return classes > 0; }
  TargetKind target_kind() const {
    return classes > 0 ? TargetKind::kClassPerSample : outputs > 0 ? TargetKind::kValues : TargetKind::kNone;
  }
  // The model output width these targets need: the classes, or the regression outputs.
  Index target_width() const { return classes > 0 ? classes : outputs; }
};

}  // namespace mpiddp::data
