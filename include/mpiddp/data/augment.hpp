#pragma once
// Augmentation of training images (data.train.augment, docs/config.md, "Augmentation"): random_crop,
// horizontal_flip and gaussian_noise, applied in list order to each gathered training batch.
// Every draw is a pure function of (run seed, epoch, the sample's index in the dataset, the
// transform's place in the list, the value) through Philox4x32-10 (core/philox.hpp), never
// of a generator's state, so a sample is augmented alike at every world size, in any batch
// position, and after a resume (Note [the augmentation counter] in src/data/augment.cpp).
//
// An image is (C, H, W), one sample's column of a batch (features = C H W, core/types.hpp),
// in PyTorch's row-major order: value (c, y, x) at c H W + y W + x.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "mpiddp/core/philox.hpp"
#include "mpiddp/core/types.hpp"

namespace mpiddp::data {

enum class AugmentType { kRandomCrop, kHorizontalFlip, kGaussianNoise };

// One entry of data.train.augment.
struct AugmentSpec {
  AugmentType type = AugmentType::kRandomCrop;
  Index padding = 0;  // random_crop: zeros added on each side before an H x W crop
  double p = 0.5;     // horizontal_flip: the probability of a flip
  double std = 0.0;   // gaussian_noise: the standard deviation of the noise added to each value
};

// The config's names of the types, in AugmentType's order.
inline const std::vector<std::string>& augment_type_names() {
  static const std::vector<std::string> names = {"random_crop", "horizontal_flip", "gaussian_noise"};
  return names;
}

// The most padding random_crop takes: far beyond any image's use, and the crop's draw
// (2 padding + 1 choices from a 32-bit word) stays unbiased to 2^-19.
inline constexpr Index kMaxAugmentPadding = 4096;

struct ImageShape {
  Index channels = 0, height = 0, width = 0;
  Index size() const { return channels * height * width; }
};

// The image shape of samples of shape `sample_shape` (the model's reading of data.train,
// named `data_name` in messages), for `specs`. A ConfigError naming data.train.augment when
// it is not (C, H, W), or the dataset has more samples than the counter tells apart (2^32).
ImageShape augment_image_shape(const std::vector<Index>& sample_shape, Index samples, const std::string& data_name);

// The random words of transform `transform` (its place in the list) on sample `sample` (its
// index in the dataset) in epoch `epoch` (0-based).
class AugmentDraws {
 public:
  // Throws (exit 1, every rank) when the epoch or the sample do not fit the counter's 32 bits.
  AugmentDraws(uint64_t seed, int64_t epoch, Index sample, Index transform);
  // The four words of block b.
  PhiloxCounter block(Index b) const;

 private:
  PhiloxKey key_;
  uint32_t sample_, transform_, epoch_;
};

// random_crop's offsets into the padded image, each uniform in [0, 2 padding].
struct CropOffsets {
  Index dy = 0, dx = 0;
};
CropOffsets draw_crop_offsets(const AugmentDraws& draws, Index padding);
// horizontal_flip's coin: true with probability p.
bool draw_flip(const AugmentDraws& draws, double p);
// gaussian_noise's two standard normal values of block b (values 2b and 2b + 1), by Box–Muller.
std::array<double, 2> draw_normal_pair(const AugmentDraws& draws, Index b);

// image: (C, H, W) -> out: (C, H, W), the image padded by `padding` zeros on each side,
// (C, H + 2 padding, W + 2 padding), cut at rows [dy, dy + H) and columns [dx, dx + W).
template <typename T>
void crop_padded(const T* image, T* out, const ImageShape& shape, Index padding, CropOffsets offsets);
// image: (C, H, W), each row reversed in place.
template <typename T>
void flip_width(T* image, const ImageShape& shape);
// image: (values), value j += std z_j with z_j from draw_normal_pair(draws, j / 2), computed
// in double and rounded to T once.
template <typename T>
void add_gaussian_noise(T* image, Index values, double std, const AugmentDraws& draws);

// A list of transforms for one shape of image, with its scratch (one image), allocated once.
template <typename T>
class Augmentation {
 public:
  Augmentation() = default;
  Augmentation(std::vector<AugmentSpec> specs, const ImageShape& shape);

  bool empty() const { return specs_.empty(); }
  // x: (C H W, count), column j sample samples[j] of the dataset; each is augmented in place
  // as the seed and epoch (0-based) draw it, whatever its column and the batch.
  void apply(T* x, Index count, const Index* samples, uint64_t seed, int64_t epoch);

 private:
  std::vector<AugmentSpec> specs_;
  ImageShape shape_;
  std::vector<T> scratch_;  // (C, H, W): random_crop's output
};

}  // namespace mpiddp::data
