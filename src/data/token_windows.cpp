#include "mpiddp/data/token_windows.hpp"

#include <cmath>
#include <vector>

#include "mpiddp/core/error.hpp"

namespace mpiddp::data {

template <typename T>
Dataset<T> token_windows(std::shared_ptr<const std::vector<int32_t>> tokens, Index vocabulary,
                         const WindowConfig& windows, const std::string& path) {
  const auto n = static_cast<Index>(tokens->size());
  const Index begin = static_cast<Index>(std::floor(windows.range_begin * static_cast<double>(n)));
  const Index end = static_cast<Index>(std::floor(windows.range_end * static_cast<double>(n)));
  const Index block = windows.block, stride = windows.stride > 0 ? windows.stride : windows.block;
  if (end - begin < block + 1)
    throw DataError(path + ": the range [" + std::to_string(windows.range_begin) + ", " +
                    std::to_string(windows.range_end) + "] holds tokens [" + std::to_string(begin) + ", " +
                    std::to_string(end) + ") of " + std::to_string(n) + ", fewer than one window of block + 1 = " +
                    std::to_string(block + 1));
  Dataset<T> d;
  d.name = path;
  d.samples = (end - begin - (block + 1)) / stride + 1;
  d.features = block;
  d.classes = vocabulary;
  d.vocabulary = vocabulary;
  d.label_positions = block;
  d.sample_stride = stride;
  d.token_ids = tokens->data() + begin;
  d.labels = tokens->data() + begin + 1;
  d.stored_bytes = tokens->size() * sizeof(int32_t);  // the whole file's ids stay loaded
  d.storage = std::move(tokens);
  return d;
}

// Note [bits per byte]
// A loss per token cannot be compared across tokenizers: a subword carries more text than a
// character. Bits per byte can: the evaluation's cross-entropy, in bits, over the bytes of text
// its targets stand for. eval_loss is the mean over every position of every evaluated sample,
// so with B the mean bytes behind those same targets, bpb = eval_loss / (ln 2 x B). Windows
// that overlap (stride < block) count a shared target twice, in the loss and in B alike.
template <typename T>
double mean_target_text_bytes(const Dataset<T>& set) {
  const double targets = static_cast<double>(set.samples) * static_cast<double>(set.label_positions);
  if (targets == 0.0) return 0.0;
  // Each label's bytes once, in a prefix sum over the labels the samples span: windows over one
  // array (stride < block) share labels, and a training set of stride 1 then costs its tokens,
  // not samples x block. Samples laid one after another are the same sum with no sharing.
  const Index span = set.label_offset(set.samples - 1) + set.label_positions;
  std::vector<Index> before(static_cast<size_t>(span) + 1, 0);  // before[k]: the bytes of labels [0, k)
  for (Index k = 0; k < span; ++k)
    before[static_cast<size_t>(k) + 1] = before[static_cast<size_t>(k)] + set.tokenizer->text_bytes(set.labels[k]);
  double bytes = 0.0;
  for (Index i = 0; i < set.samples; ++i)
    bytes += static_cast<double>(before[static_cast<size_t>(set.label_offset(i) + set.label_positions)] -
                                 before[static_cast<size_t>(set.label_offset(i))]);
  return bytes / targets;
}

template double mean_target_text_bytes<float>(const Dataset<float>&);
template double mean_target_text_bytes<double>(const Dataset<double>&);

template Dataset<float> token_windows<float>(std::shared_ptr<const std::vector<int32_t>>, Index,
                                             const WindowConfig&, const std::string&);
template Dataset<double> token_windows<double>(std::shared_ptr<const std::vector<int32_t>>, Index,
                                               const WindowConfig&, const std::string&);

}  // namespace mpiddp::data
