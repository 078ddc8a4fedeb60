#pragma once
// Dropout as PyTorch's nn.Dropout: in training each value is zeroed with probability p and
// the kept ones are scaled by 1/(1-p); in evaluation it is the identity.
//
// The mask is drawn by nn/dropout_mask.hpp: the sample at position q of a step is dropped
// alike at every world size, in any column order, and after a resume.
#include <string>

#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/nn/layer.hpp"

namespace mpiddp::nn {

struct DropoutOptions {
  double p = 0.5;  // in [0, 1)
  static DropoutOptions parse(io::JsonSection& section);
};

template <typename T>
class Dropout final : public Layer<T> {
 public:
  // key: the layer's config path ("model.layers[2]"): its hash tells dropout layers apart.
  Dropout(const DropoutOptions& options, const Shape& input, const std::string& key);

  std::string type() const override { return "dropout"; }
  // p changes no tensor, so it is not part of the description.
  std::string describe() const override { return "dropout"; }
  // The multiplier mask (inputs, max_batch), kept from forward to backward; none for p = 0.
  size_t scratch_bytes(Index max_batch) const override;
  double multiply_adds_per_sample() const override { return static_cast<double>(this->inputs()); }
  // The mask follows each column's position; applying it is one product per value.
  bool supports_chunked_pass(Index) const override { return true; }
  void bind(const LayerMemory<T>& memory) override;
  void forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) override;
  void backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T> y,
                ConstMatrixView<T> dy, MatrixView<T>* dx) override;

  double p() const { return p_; }

 private:
  bool active(const PassContext& context) const { return context.training && p_ > 0.0; }

  double p_;
  T scale_;        // 1 / (1 - p)
  uint64_t salt_;  // fnv1a of the key path
  std::string key_;
  T* mask_ = nullptr;  // (inputs, max_batch): 0 or scale_, written by forward
};

}  // namespace mpiddp::nn
