#pragma once
// Batch normalisation as PyTorch's BatchNorm1d and BatchNorm2d, over the global batch.
//
// Channels are the first dimension of the per-sample shape: batchnorm1d takes (F) (F
// channels of one value) or (C, L); batchnorm2d takes (C, H, W). Each channel is normalised
// over its N values in the step's whole batch, S = L or H*W per sample, summed over every
// rank through PassContext::statistics (Note [batch statistics over the ranks] in
// batchnorm.cpp), so the result does not depend on the world size.
//
//   training:   y = (x - mean) / sqrt(var + eps) * weight + bias, mean and biased var of the
//               batch; running_mean and running_var (unbiased) move by momentum towards
//               them and num_batches_tracked counts the steps.
//   evaluation: the same with running_mean and running_var; no communication.
//
// Parameters (affine): "weight" [C] (1), "bias" [C] (0). Buffers: "running_mean" [C] (0),
// "running_var" [C] (1), "num_batches_tracked" [] int64 (0). PyTorch's names and defaults.
#include <string>

#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/nn/layer.hpp"

namespace mpiddp::nn {

struct BatchNormOptions {
  int dimensions = 2;     // 1: batchnorm1d, (F) or (C, L); 2: batchnorm2d, (C, H, W)
  double momentum = 0.1;  // in [0, 1]
  double eps = 1e-5;      // > 0
  bool affine = true;
  // Reads momentum, eps and affine; a ConfigError names the key path.
  static BatchNormOptions parse(io::JsonSection& section, int dimensions);
};

// The two registry entries' options: the same keys, a different input rank.
struct BatchNorm1dOptions : BatchNormOptions {
  static BatchNorm1dOptions parse(io::JsonSection& section) {
    return {BatchNormOptions::parse(section, 1)};
  }
};
struct BatchNorm2dOptions : BatchNormOptions {
  static BatchNorm2dOptions parse(io::JsonSection& section) {
    return {BatchNormOptions::parse(section, 2)};
  }
};

template <typename T>
class BatchNorm final : public Layer<T> {
 public:
  // key: the layer's config path ("model.layers[1]"), for messages.
  BatchNorm(const BatchNormOptions& options, const Shape& input, const std::string& key);

  std::string type() const override {
    return options_.dimensions == 1 ? "batchnorm1d" : "batchnorm2d";
  }
  // "batchnorm2d", or "batchnorm2d_noaffine" without parameters ('-' separates layers).
  std::string describe() const override { return type() + (options_.affine ? "" : "_noaffine"); }
  std::vector<TensorSpec> parameters() const override;
  std::vector<BufferSpec> buffers() const override;
  // Per-channel statistics only: their size does not depend on the batch.
  size_t scratch_bytes(Index max_batch) const override;
  // A subtraction and a multiply-add per value.
  double multiply_adds_per_sample() const override {
    return 2.0 * static_cast<double>(this->inputs());
  }
  // ConfigError (exit 2) on the layer's key when `smallest` samples give one value per channel.
  void check_training_batch(Index smallest) const override;
  // A training forward moves the running statistics (and, synchronised, is a collective):
  // a second one would move them twice, so no recomputing residual may hold it.
  bool can_run_forward_twice() const override { return false; }
  void bind(const LayerMemory<T>& memory) override;
  // weight 1, bias 0, running_mean 0, running_var 1, num_batches_tracked 0; draws nothing.
  void initialize(Rng& rng) override;
  // Training: one statistics->sum of 3C values (when not null); throws Error (exit 2, every
  // rank) when the batch has one value per channel.
  void forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) override;
  // Training with dx: one statistics->sum of 2C values (when not null); without dx, none.
  void backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T> y,
                ConstMatrixView<T> dy, MatrixView<T>* dx) override;

  Index channels() const { return channels_; }

 private:
  // Fills mean_, invstd_ and count_ from this batch (and the other ranks'), and moves the
  // running statistics.
  void batch_statistics(const PassContext& context, ConstMatrixView<T> x);

  BatchNormOptions options_;
  std::string key_;
  Index channels_ = 0;  // C
  Index spatial_ = 1;   // S: values per channel per sample (1, L or H*W)

  T* weight_ = nullptr;         // (C), null without affine
  T* bias_ = nullptr;           // (C)
  T* weight_grad_ = nullptr;    // (C)
  T* bias_grad_ = nullptr;      // (C)
  T* running_mean_ = nullptr;   // (C)
  T* running_var_ = nullptr;    // (C)
  int64_t* batches_tracked_ = nullptr;  // ()
  // Scratch, kept from forward to backward: the statistics this pass normalised with.
  double* mean_ = nullptr;    // (C)
  double* invstd_ = nullptr;  // (C) 1 / sqrt(var + eps)
  double* count_ = nullptr;   // () N: the values per channel in the (global) batch
  double* sums_ = nullptr;    // (3, C) the vector handed to statistics->sum
};

}  // namespace mpiddp::nn
