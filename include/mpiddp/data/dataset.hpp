#pragma once
// An in-memory (or memory-mapped) dataset, read-only once built. Every rank holds the
// whole dataset; the sampler decides which samples a rank touches.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/core/input_kind.hpp"
#include "mpiddp/core/target_kind.hpp"
#include "mpiddp/core/types.hpp"
#include "mpiddp/tokenizer/tokenizer.hpp"

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
  // Labels per sample: 1, or one per position (a language model's next tokens).
  Index label_positions = 1;
  const T* x = nullptr;     // (features, samples): sample i is the contiguous column i
  // Token data instead of x: (features, samples) ids in [0, vocabulary), one per position.
  const int32_t* token_ids = nullptr;
  Index vocabulary = 0;
  const T* y = nullptr;     // (outputs, samples), regression only
  const int32_t* labels = nullptr;  // (label_positions, samples), classification only
  // Token data read as overlapping windows of one array (the text source): sample i's ids
  // start at token_ids + i * sample_stride, its labels at labels + i * sample_stride. 0: each
  // sample's values follow the last's (features ids, label_positions labels).
  Index sample_stride = 0;
  // What turns the ids into text and back: the text source's, or a tokens source's
  // "tokenizer" (null for other sources). It travels with the weights (checkpoint/vocabulary.hpp).
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  std::shared_ptr<const void> storage;  // keeps x, y and labels alive (vectors or a mapping)
  // What `storage` holds in bytes when it is more than the samples span (the text and tokens
  // sources' ids of the whole file, of which a range makes the windows); 0: the span.
  size_t stored_bytes = 0;

  bool is_classification() const { return classes > 0; }
  Index token_offset(Index i) const { return i * (sample_stride > 0 ? sample_stride : features); }
  Index label_offset(Index i) const { return i * (sample_stride > 0 ? sample_stride : label_positions); }
  InputKind input_kind() const { return token_ids ? InputKind::kTokenIds : InputKind::kValues; }
  TargetKind target_kind() const {
    if (classes > 0) return label_positions > 1 ? TargetKind::kClassPerPosition : TargetKind::kClassPerSample;
    return outputs > 0 ? TargetKind::kValues : TargetKind::kNone;
  }
  // The model output width these targets need: the classes (at every position), or the
  // regression outputs.
  Index target_width() const { return classes > 0 ? classes * label_positions : outputs; }
  // The bytes a rank holds for it (train/memory_plan.hpp): stored_bytes when the loader gave
  // it (windows over one array give it, their ids and labels being one array), else the
  // samples' values, ids and targets.
  size_t bytes() const {
    if (stored_bytes > 0) return stored_bytes;
    const size_t n = static_cast<size_t>(samples);
    size_t total = 0;
    if (x) total += n * static_cast<size_t>(features) * sizeof(T);
    if (token_ids) total += n * static_cast<size_t>(features) * sizeof(int32_t);
    if (y) total += n * static_cast<size_t>(outputs) * sizeof(T);
    if (labels) total += n * static_cast<size_t>(label_positions) * sizeof(int32_t);
    return total;
  }
};

}  // namespace mpiddp::data
