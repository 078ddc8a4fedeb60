#pragma once
// The shape of one sample, as PyTorch writes it without the batch dimension: (C, H, W) for
// an image, (F) for a vector. A batch is (features, B) in memory (core/types.hpp), where
// features = the product of the shape and each sample's column is its tensor in PyTorch's
// row-major order (channel, then row, then column), so flattening is a no-op.
#include <string>
#include <vector>

#include "mpiddp/core/types.hpp"

namespace mpiddp::nn {

using Shape = std::vector<Index>;

// The number of values of one sample: the product of the dimensions (1 for an empty shape).
Index shape_size(const Shape& shape);
// "(1, 28, 28)"
std::string shape_text(const Shape& shape);
// "1x28x28": the compact form used in model descriptions.
std::string shape_tag(const Shape& shape);

}  // namespace mpiddp::nn
