#pragma once
// Losses: mean over the batch, as PyTorch's reduction="mean".
#include <cstdint>
#include <memory>
#include <string>

#include "mpiddp/core/types.hpp"

namespace mpiddp::nn {

// Targets of one batch: regression values (O, B), or class labels (P, B) for classification,
// one per sample (P = 1) or one per position.
template <typename T>
struct BatchTargets {
  const T* values = nullptr;         // (O, B), regression
  const int32_t* labels = nullptr;   // (positions, B), classification
  Index positions = 1;               // labels per sample: 1, or one per position
};

// Sums over a set of samples, for an exact evaluation that can be reduced across ranks.
struct EvalSums {
  double loss_sum = 0.0;   // sum of per-sample losses
  double correct = 0.0;    // samples whose argmax equals the label (classification)
};

template <typename T>
class Loss {
 public:
  virtual ~Loss() = default;
  virtual std::string name() const = 0;
  virtual bool is_classification() const = 0;
  // out: (O, B). Returns the mean loss over the batch and writes dLoss/dout: (O, B).
  virtual double forward_backward(ConstMatrixView<T> out, const BatchTargets<T>& targets,
                                  MatrixView<T> grad) const = 0;
  // Adds the per-sample losses (and correct predictions) of out: (O, B) to sums.
  virtual void accumulate(ConstMatrixView<T> out, const BatchTargets<T>& targets,
                          EvalSums& sums) const = 0;
};

// Mean squared error, mean over samples and outputs: sum (out - t)^2 / (O * B).
template <typename T>
class MseLoss final : public Loss<T> {
 public:
  std::string name() const override { return "mse"; }
  bool is_classification() const override { return false; }
  double forward_backward(ConstMatrixView<T> out, const BatchTargets<T>& targets,
                          MatrixView<T> grad) const override;
  // Per-sample loss: the mean over outputs, so that the mean over samples equals the batch loss.
  void accumulate(ConstMatrixView<T> out, const BatchTargets<T>& targets,
                  EvalSums& sums) const override;
};

// Softmax cross-entropy on logits with integer class targets, mean over samples (and over
// their positions, with a class per position).
template <typename T>
class CrossEntropyLoss final : public Loss<T> {
 public:
  std::string name() const override { return "cross_entropy"; }
  bool is_classification() const override { return true; }
  double forward_backward(ConstMatrixView<T> out, const BatchTargets<T>& targets,
                          MatrixView<T> grad) const override;
  void accumulate(ConstMatrixView<T> out, const BatchTargets<T>& targets,
                  EvalSums& sums) const override;
};

// A registered loss type by name, with its defaults (nn/loss_registry.hpp); an unknown name
// throws ConfigError on key "loss".
template <typename T>
std::unique_ptr<Loss<T>> make_loss(const std::string& name);

}  // namespace mpiddp::nn
