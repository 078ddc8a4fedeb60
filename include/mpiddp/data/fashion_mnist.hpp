#pragma once
// Fashion-MNIST from the Debian package dataset-fashion-mnist: 60 000 training and 10 000
// test images of 28 x 28 pixels in 10 classes, as gzip IDX files. Pixels are scaled to
// [0, 1] and flattened to 784 features.
#include <string>

#include "mpiddp/data/dataset.hpp"

namespace mpiddp::data {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline constexpr const char* kFashionMnistPackage = "dataset-fashion-mnist";

struct FashionMnistConfig {
  std::string split = "train";        // train | test
  std::string dir = kFashionMnistDir;  // holds {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
};

// A DataError says which package to install when the files are not there.
template <typename T>
Dataset<T> load_fashion_mnist(const FashionMnistConfig& config);

}  // namespace mpiddp::data
