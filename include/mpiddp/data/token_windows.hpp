#pragma once
// Samples as windows over one array of token ids (the text and tokens sources). With n tokens,
// range [a, b] is tokens [floor(a n), floor(b n)); sample k starts at floor(a n) + k stride and
// holds block + 1 tokens: x its first block, y its last block (the next token at each
// position). Every sample whose block + 1 tokens fit in the range exists. Nothing is copied:
// x and y are views into the one array each rank holds (Dataset::sample_stride).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/core/types.hpp"
#include "mpiddp/data/dataset.hpp"

namespace mpiddp::data {

struct WindowConfig {
  Index block = 0;   // T, the positions per sample
  Index stride = 0;  // 0: block
  double range_begin = 0.0, range_end = 1.0;
};

// The windows of `tokens` (ids in [0, vocabulary)); a DataError naming `path` when the range
// holds no window of block + 1 tokens.
template <typename T>
Dataset<T> token_windows(std::shared_ptr<const std::vector<int32_t>> tokens, Index vocabulary,
                         const WindowConfig& windows, const std::string& path);

// The mean bytes of text behind the targets of the dataset's samples, every position of every
// sample counted (Tokenizer::text_bytes): the divisor of bits per byte. The dataset has a tokenizer.
template <typename T>
double mean_target_text_bytes(const Dataset<T>& set);

}  // namespace mpiddp::data
