#include "mpiddp/data/fashion_mnist.hpp"

#include <filesystem>

#include "mpiddp/core/error.hpp"
#include "mpiddp/data/idx.hpp"

namespace mpiddp::data {

namespace {

// The file as the package ships it (.gz), or decompressed next to it.
std::string find_file(const FashionMnistConfig& config, const std::string& stem) {
  const std::filesystem::path dir(config.dir);
  for (const char* suffix : {".gz", ""}) {
    const auto path = dir / (stem + suffix);
    if (std::filesystem::exists(path)) return path.string();
  }
  throw DataError("Fashion-MNIST " + config.split + " split not found: no " + stem + ".gz (or " +
                  stem + ") in " + config.dir + ". Install the Debian package " +
                  kFashionMnistPackage + " (apt-get install " + kFashionMnistPackage +
                  ", or scripts/install-deps.sh --with-data), or set the source's \"dir\" to "
                  "the folder that holds the files");
}

}  // namespace

template <typename T>
Dataset<T> load_fashion_mnist(const FashionMnistConfig& config) {
  // The package keeps the original names: the test split is "t10k".
  const std::string prefix = config.split == "test" ? "t10k" : "train";
  IdxConfig idx;
  idx.images = find_file(config, prefix + "-images-idx3-ubyte");
  idx.labels = find_file(config, prefix + "-labels-idx1-ubyte");
  idx.classes = 10;
  idx.scale = 1.0 / 255.0;
  Dataset<T> d = load_idx<T>(idx);
  if (d.features != 28 * 28)
    throw DataError(idx.images + ": Fashion-MNIST images must be 28 x 28, got " +
                    std::to_string(d.features) + " pixels per image");
  d.name = "fashion_mnist/" + config.split;
  return d;
}

template Dataset<float> load_fashion_mnist<float>(const FashionMnistConfig&);
template Dataset<double> load_fashion_mnist<double>(const FashionMnistConfig&);

}  // namespace mpiddp::data
