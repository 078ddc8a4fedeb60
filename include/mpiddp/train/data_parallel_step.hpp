#pragma once
// The default step (sync on): every rank's gradients summed and divided by N by the
// gradient reducer, the loss and the stop votes riding in the same reduction, and the
// reduction of each bucket starting during backward (reduce.overlap) on every path.
#include <optional>

#include "mpiddp/train/synchronized_step.hpp"

namespace mpiddp::train {

template <typename T>
class DataParallelStep final : public SynchronizedStep<T> {
 public:
  explicit DataParallelStep(const StepParts<T>& parts);

  StepOutcome reduce(double local_loss) override;

 private:
  nn::GradientListener* before_last_backward(double loss) override;
  // Whether the step may apply: the same answer on every rank, without communication.
  bool reduced_values_finite(std::optional<bool> sums_finite) const;

  // Hands backward's "gradients ready" calls to the reducer.
  struct ReadyForwarder final : nn::GradientListener {
    distributed::GradientReducer<T>* reducer = nullptr;
    void gradients_ready(Index offset) override { reducer->ready_from(static_cast<size_t>(offset)); }
  };

  distributed::GradientReducer<T>& reducer_;
  ReadyForwarder ready_forwarder_;
  // Fault injection writes into the gradient buffer after backward, which an overlapped
  // reduction may already be sending: a run with injection reduces after backward.
  bool overlap_;
  bool sync_started_ = false;  // compute_gradients began the reduction, reduce finishes it
};

}  // namespace mpiddp::train
