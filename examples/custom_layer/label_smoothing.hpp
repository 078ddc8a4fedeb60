#pragma once
// label_smoothed_cross_entropy: softmax cross-entropy against a smoothed target, as
// PyTorch's F.cross_entropy(logits, y, label_smoothing=eps): each sample's target puts
// 1 - eps + eps/K on its class and eps/K on every other of the K classes,
//   loss = mean over samples of -sum_c q_c log softmax(z)_c.
// A loss type of your own, added to the loss registry as swish is to the layer registry:
//   "loss": {"type": "label_smoothed_cross_entropy", "smoothing": 0.1}
#include <mpiddp/io/json_reader.hpp>
#include <mpiddp/nn/loss.hpp>
#include <mpiddp/nn/loss_registry.hpp>

#include <vector>

namespace swish_example {

struct LabelSmoothingOptions {
  double smoothing = 0.1;  // eps, in [0, 1)
  static LabelSmoothingOptions parse(mpiddp::io::JsonSection& section);
};

template <typename T>
class LabelSmoothedCrossEntropy final : public mpiddp::nn::Loss<T> {
 public:
  explicit LabelSmoothedCrossEntropy(const LabelSmoothingOptions& options) : eps_(options.smoothing) {}

  std::string name() const override { return "label_smoothed_cross_entropy"; }
  bool is_classification() const override { return true; }
  // out: (K, B) logits. Returns the batch mean; grad = (softmax(z) - q) / B: (K, B).
  double forward_backward(mpiddp::ConstMatrixView<T> out, const mpiddp::nn::BatchTargets<T>& targets,
                          mpiddp::MatrixView<T> grad) const override;
  // Adds each sample's smoothed loss, and 1 for each whose argmax is its label.
  void accumulate(mpiddp::ConstMatrixView<T> out, const mpiddp::nn::BatchTargets<T>& targets,
                  mpiddp::nn::EvalSums& sums) const override;

 private:
  double eps_;
  mutable std::vector<double> probabilities_;  // (K) scratch of forward_backward
};

// The registry entry: register it (mpiddp::nn::register_loss_type) before a config is parsed.
mpiddp::nn::LossType label_smoothing_loss_type();

}  // namespace swish_example
