#include "mpiddp/data/augment.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/hash.hpp"
#include "mpiddp/core/rng.hpp"
#include "mpiddp/nn/shape.hpp"

namespace mpiddp::data {

// Note [the augmentation counter]
// Transform t (its 0-based place in data.train.augment) on sample i (its 0-based index in the
// training set) in epoch e (0-based) takes its random words from the blocks
//   philox4x32_10(counter = (b, i, t, e), key = mix_seed(seed, fnv1a("data.train.augment")))
// (the key's low 32 bits first), b = 0, 1, ...:
//   random_crop      block 0: dy = floor(w0 (2P + 1) / 2^32), dx = floor(w1 (2P + 1) / 2^32);
//   horizontal_flip  block 0: a flip when w0 2^-32 < p;
//   gaussian_noise   block b: the normals of values 2b and 2b + 1 (the image's (C, H, W) order,
//                    after the transforms before it), by Box–Muller from u1 = (floor((w0 2^32 +
//                    w1) / 2^11) + 1) 2^-53 in (0, 1] and u2 = floor((w2 2^32 + w3) / 2^11) 2^-53.
// Nothing in it depends on the rank, the world size, the batch or the sample's column in it,
// nor on how many draws came before: a sample is augmented alike at every N, in any order,
// and a resumed run draws what the uninterrupted one drew. A sample the sampler pads an
// epoch with (drop_last false) is augmented as its first occurrence. Every word must fit in
// 32 bits: b < 2^32 as an image has at most 2^33 values (augment_image_shape checks); i < 2^32
// (checked there too); t, the list's length; e < 2^32 (checked in every draw).

namespace {

constexpr int64_t kAugmentWord = int64_t{1} << 32;

// An integer uniform in [0, n) from one 32-bit word (Lemire's multiply-shift; its bias, n / 2^32,
// is below 2^-19 for n <= 2 kMaxAugmentPadding + 1).
Index augment_below(uint32_t word, Index n) {
  return static_cast<Index>((static_cast<uint64_t>(word) * static_cast<uint64_t>(n)) >> 32);
}

// 53 random bits from two words, as an integer in [0, 2^53).
uint64_t augment_bits53(uint32_t high, uint32_t low) {
  return ((static_cast<uint64_t>(high) << 32) | low) >> 11;
}

}  // namespace

ImageShape augment_image_shape(const std::vector<Index>& sample_shape, Index samples, const std::string& data_name) {
  const bool image = sample_shape.size() == 3 &&
                     std::all_of(sample_shape.begin(), sample_shape.end(), [](Index d) { return d >= 1; });
  if (!image)
    throw ConfigError("data.train.augment",
                      "augmentation takes images, samples of shape (C, H, W), but the model reads data.train (" +
                          data_name + ") as samples of shape " + nn::shape_text(sample_shape) +
                          "; give images (npy [N, C, H, W], idx) or read flat data as images with "
                          "model.input_shape, like [1, 28, 28]");
  const ImageShape shape{sample_shape[0], sample_shape[1], sample_shape[2]};
  if (shape.size() > 2 * kAugmentWord)
    throw ConfigError("data.train.augment", "an image of " + std::to_string(shape.size()) +
                                                " values is more than the augmentation's counter tells apart (2^33)");
  if (samples > kAugmentWord)
    throw ConfigError("data.train.augment", "data.train has " + std::to_string(samples) +
                                                " samples, more than the augmentation's counter tells apart (2^32)");
  return shape;
}

AugmentDraws::AugmentDraws(uint64_t seed, int64_t epoch, Index sample, Index transform) {
  if (epoch < 0 || epoch >= kAugmentWord || sample < 0 || sample >= kAugmentWord || transform < 0 ||
      transform >= kAugmentWord)
    throw Error(kExitFailure,
                "data.train.augment: the augmentation's counter needs epoch, sample and transform in "
                "[0, 2^32), got epoch " + std::to_string(epoch) + ", sample " + std::to_string(sample) +
                    ", transform " + std::to_string(transform),
                Scope::kEveryRank);
  const uint64_t key = mix_seed(seed, fnv1a("data.train.augment"));
  key_ = {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)};
  sample_ = static_cast<uint32_t>(sample);
  transform_ = static_cast<uint32_t>(transform);
  epoch_ = static_cast<uint32_t>(epoch);
}

PhiloxCounter AugmentDraws::block(Index b) const {
  return philox4x32_10({static_cast<uint32_t>(b), sample_, transform_, epoch_}, key_);
}

CropOffsets draw_crop_offsets(const AugmentDraws& draws, Index padding) {
  const PhiloxCounter words = draws.block(0);
  return {augment_below(words[0], 2 * padding + 1), augment_below(words[1], 2 * padding + 1)};
}

bool draw_flip(const AugmentDraws& draws, double p) {
  return static_cast<double>(draws.block(0)[0]) * 0x1p-32 < p;
}

std::array<double, 2> draw_normal_pair(const AugmentDraws& draws, Index b) {
  const PhiloxCounter words = draws.block(b);
  const double u1 = static_cast<double>(augment_bits53(words[0], words[1]) + 1) * 0x1p-53;  // (0, 1]
  const double u2 = static_cast<double>(augment_bits53(words[2], words[3])) * 0x1p-53;      // [0, 1)
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 2.0 * std::numbers::pi * u2;
  return {r * std::cos(theta), r * std::sin(theta)};
}

template <typename T>
void crop_padded(const T* image, T* out, const ImageShape& shape, Index padding, CropOffsets offsets) {
  const Index h = shape.height, w = shape.width;
  // Output (y, x) reads the image at (y + dy - padding, x + dx - padding), zero outside it:
  // columns [x0, x1) of each row are inside.
  const Index shift_y = offsets.dy - padding, shift_x = offsets.dx - padding;
  const Index x0 = std::clamp<Index>(-shift_x, 0, w), x1 = std::clamp<Index>(w - shift_x, x0, w);
  for (Index c = 0; c < shape.channels; ++c)
    for (Index y = 0; y < h; ++y) {
      T* row = out + (c * h + y) * w;  // (W)
      const Index source_y = y + shift_y;
      if (source_y < 0 || source_y >= h) {
        std::fill(row, row + w, T(0));
        continue;
      }
      const T* source = image + (c * h + source_y) * w;  // (W)
      std::fill(row, row + x0, T(0));
      std::copy(source + x0 + shift_x, source + x1 + shift_x, row + x0);
      std::fill(row + x1, row + w, T(0));
    }
}

template <typename T>
void flip_width(T* image, const ImageShape& shape) {
  for (Index row = 0; row < shape.channels * shape.height; ++row)
    std::reverse(image + row * shape.width, image + (row + 1) * shape.width);
}

template <typename T>
void add_gaussian_noise(T* image, Index values, double std, const AugmentDraws& draws) {
  for (Index b = 0; 2 * b < values; ++b) {
    const std::array<double, 2> z = draw_normal_pair(draws, b);
    for (Index k = 0; k < 2 && 2 * b + k < values; ++k) {
      T& v = image[2 * b + k];
      v = static_cast<T>(static_cast<double>(v) + std * z[static_cast<size_t>(k)]);
    }
  }
}

template <typename T>
Augmentation<T>::Augmentation(std::vector<AugmentSpec> specs, const ImageShape& shape)
    : specs_(std::move(specs)), shape_(shape) {
  const bool crops = std::any_of(specs_.begin(), specs_.end(),
                                 [](const AugmentSpec& s) { return s.type == AugmentType::kRandomCrop; });
  if (crops) scratch_.assign(static_cast<size_t>(shape_.size()), T(0));
}

template <typename T>
void Augmentation<T>::apply(T* x, Index count, const Index* samples, uint64_t seed, int64_t epoch) {
  const Index n = shape_.size();
  for (Index j = 0; j < count; ++j) {
    T* image = x + j * n;  // (C, H, W)
    for (size_t t = 0; t < specs_.size(); ++t) {
      const AugmentSpec& spec = specs_[t];
      const AugmentDraws draws(seed, epoch, samples[j], static_cast<Index>(t));
      switch (spec.type) {
        case AugmentType::kRandomCrop: {
          const CropOffsets offsets = draw_crop_offsets(draws, spec.padding);
          if (offsets.dy == spec.padding && offsets.dx == spec.padding) break;  // the image itself
          crop_padded(image, scratch_.data(), shape_, spec.padding, offsets);
          std::copy(scratch_.begin(), scratch_.end(), image);
          break;
        }
        case AugmentType::kHorizontalFlip:
          if (draw_flip(draws, spec.p)) flip_width(image, shape_);
          break;
        case AugmentType::kGaussianNoise:
          // std 0 adds nothing; skipping it also keeps a -0.0 (which + 0.0 would make +0.0).
          if (spec.std > 0.0) add_gaussian_noise(image, n, spec.std, draws);
          break;
      }
    }
  }
}

template void crop_padded<float>(const float*, float*, const ImageShape&, Index, CropOffsets);
template void crop_padded<double>(const double*, double*, const ImageShape&, Index, CropOffsets);
template void flip_width<float>(float*, const ImageShape&);
template void flip_width<double>(double*, const ImageShape&);
template void add_gaussian_noise<float>(float*, Index, double, const AugmentDraws&);
template void add_gaussian_noise<double>(double*, Index, double, const AugmentDraws&);
template class Augmentation<float>;
template class Augmentation<double>;

}  // namespace mpiddp::data
