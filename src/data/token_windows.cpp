#include "mpiddp/data/token_windows.hpp"

#include <cmath>

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
  d.storage = std::move(tokens);
  return d;
}

template Dataset<float> token_windows<float>(std::shared_ptr<const std::vector<int32_t>>, Index,
                                             const WindowConfig&, const std::string&);
template Dataset<double> token_windows<double>(std::shared_ptr<const std::vector<int32_t>>, Index,
                                               const WindowConfig&, const std::string&);

}  // namespace mpiddp::data
