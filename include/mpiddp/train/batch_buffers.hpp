#pragma once
// One set of batch buffers: the inputs and targets of up to `capacity` samples gathered from a
// dataset, and, when they are training samples, which ones and how they were augmented
// (BatchContents), so that a pass over some of them can read them where they lie. The
// pipeline's passes read one set; the prefetcher fills another on its worker thread
// (train/batch_prefetcher.hpp), and the two trade places. Allocated once.
#include <cstdint>
#include <vector>

#include "mpiddp/core/input_kind.hpp"
#include "mpiddp/core/types.hpp"
#include "mpiddp/data/augment.hpp"
#include "mpiddp/data/dataset.hpp"
#include "mpiddp/nn/batch_input.hpp"
#include "mpiddp/nn/loss.hpp"
#include "mpiddp/nn/model.hpp"

namespace mpiddp::train {

// Which training samples a batch holds, column by column, and the seed and epoch their
// augmentation was drawn for: a batch's identity. The same samples with the same seed and
// epoch are the same bits, wherever and whenever gathered (data/augment.hpp).
struct BatchContents {
  std::vector<Index> samples;  // (capacity) indices into the training set; the first `count` held
  Index count = 0;             // 0: no training batch (nothing, or an evaluation's)
  uint64_t seed = 0;
  int64_t epoch = 0;           // 0-based

  explicit BatchContents(Index capacity = 0) : samples(static_cast<size_t>(capacity), 0) {}
  // Remembers samples[0, n) with seed and epoch; n at most the capacity. Allocates nothing.
  void assign(const Index* indices, Index n, uint64_t seed_drawn, int64_t epoch_drawn);
  // The first column of a run of consecutive columns holding indices[0, n) drawn for `seed_asked`
  // and `epoch_asked`, or -1. Any such run does: equal samples are equal bits.
  Index find(const Index* indices, Index n, uint64_t seed_asked, int64_t epoch_asked) const;
};

template <typename T>
class BatchBuffers {
 public:
  BatchBuffers() = default;
  // capacity: the most samples (the per-rank batch); inputs: the model's inputs per sample,
  // of `kind`; target_outputs: the widest regression target of the sets it will gather (0 for
  // class labels); label_rows: labels per sample.
  BatchBuffers(Index capacity, Index inputs, InputKind kind, Index target_outputs, Index label_rows);
  // The bytes such a set allocates: memory.limit_mb's plan (train/memory_plan.hpp).
  static size_t bytes(Index capacity, Index inputs, InputKind kind, Index target_outputs, Index label_rows) {
    const size_t input = kind == InputKind::kTokenIds ? sizeof(int32_t) : sizeof(T);
    return static_cast<size_t>(capacity) *
           (static_cast<size_t>(inputs) * input + static_cast<size_t>(target_outputs) * sizeof(T) +
            static_cast<size_t>(label_rows) * sizeof(int32_t) + sizeof(Index));
  }

  // Gathers `count` samples of `set` (samples: their indices) into columns [0, count); an
  // evaluation's, so it then holds no training batch.
  void gather(const data::Dataset<T>& set, const Index* samples, Index count);
  // The same for training samples, then augmented as seed and epoch draw it (augmentation
  // empty: as they are), and remembered in contents().
  void gather_training(const data::Dataset<T>& set, const Index* samples, Index count,
                       data::Augmentation<T>& augmentation, uint64_t seed, int64_t epoch);
  // Columns [first, first + count) of the training batch held, ready for a pass: where they
  // lie when that keeps each value buffer's alignment, else moved to column 0 (Note [a part
  // of a held batch]). Returns their first column.
  Index place(Index first, Index count);

  const BatchContents& contents() const { return contents_; }
  // The model's input, columns [first, first + count), and the targets from column `first` on.
  nn::BatchInput<T> input(Index first, Index count) const;
  nn::BatchTargets<T> targets(Index first) const;

  // Trades every buffer and the contents with `other` (no copy, no allocation).
  void swap(BatchBuffers& other) noexcept;

 private:
  InputKind kind_ = InputKind::kValues;  // what the model takes: x_ or token_ids_
  Index x_rows_ = 0, y_rows_ = 0;        // the gathered set's features and regression outputs
  Index label_rows_ = 1;                 // the gathered set's labels per sample
  nn::AlignedVector<T> x_;               // (features, capacity), values
  std::vector<int32_t> token_ids_;       // (positions, capacity), token ids
  nn::AlignedVector<T> y_;               // (outputs, capacity), regression
  std::vector<int32_t> labels_;          // (label positions, capacity), classification
  BatchContents contents_;
};

}  // namespace mpiddp::train
