// The default data-parallel step (include/mpiddp/train/data_parallel_step.hpp).
#include "mpiddp/train/data_parallel_step.hpp"

#include <cmath>
#include <optional>

#include "mpiddp/core/finite.hpp"

namespace mpiddp::train {

template <typename T>
DataParallelStep<T>::DataParallelStep(const StepParts<T>& parts)
    : SynchronizedStep<T>(parts),
      reducer_(parts.reducer),
      overlap_(parts.config.reduce.overlap && !parts.config.faults.inject.enabled()) {
  ready_forwarder_.reducer = &reducer_;
  this->scope().plan_reduction(reducer_, this->model_);
}

template <typename T>
nn::GradientListener* DataParallelStep<T>::before_last_backward(double loss) {
  if (!overlap_) return nullptr;
  // Note [the loss rides with the gradients]: the loss slot is final before backward, and
  // so is the stop vote (a signal during backward is seen by the next step).
  T* tail = this->model_.gradients() + this->model_.parameter_count();
  tail[kLossSlot] = static_cast<T>(loss);
  tail[kStopSlot] = static_cast<T>(stop_vote());
  reducer_.begin(this->model_.gradients(), static_cast<size_t>(this->model_.gradient_count()));
  sync_started_ = true;
  return &ready_forwarder_;
}

template <typename T>
StepOutcome DataParallelStep<T>::reduce(double local_loss) {
  // Note [the loss rides with the gradients]: the step's reported loss is the mean over the
  // whole global batch, not rank 0's shard. Every rank's shard has the same size, so that
  // is the mean of the per-rank losses: exactly what the reducer computes for a gradient.
  // Putting the loss in one slot after the gradients gets it for free in the same
  // allreduce, without a second round trip. A NaN or Inf on any rank also lands there.
  StepOutcome outcome;
  nn::Model<T>& model = this->model_;
  const Index p = model.parameter_count();
  T* grads = model.gradients();
  if (sync_started_) {
    // The overlapped reduction has been sending buckets since backward began, so this
    // rank's own gradients can no longer be inspected: only its loss names it if a step
    // turns out non-finite (StepGuard::nonfinite_step says so).
    outcome.locally_finite = std::isfinite(local_loss);
    outcome.gradients_inspected = false;
    reducer_.finish();
    sync_started_ = false;
  } else {
    grads[p + kLossSlot] = static_cast<T>(local_loss);
    outcome.locally_finite = all_finite(grads, p + 1);  // the reduction overwrites them: look first
    outcome.gradients_inspected = true;
    grads[p + kStopSlot] = static_cast<T>(stop_vote());
    reducer_.reduce(grads, static_cast<size_t>(model.gradient_count()));
  }
  // What the reduction saw of the summed values, alike on every rank, or nullopt when it
  // could not tell and the buffer is scanned; the loss and stop vote in their slots.
  const std::optional<bool> sums_finite = this->scope().agree_on_sums(reducer_, model);
  this->pipeline_.phases().lap(&record::StepProfile::sync_exposed_s, record::SpanKind::kReductionWait);
  // The mean of 0/1 votes is positive exactly when some rank voted (1/N never underflows).
  outcome.stop_requested = grads[p + kStopSlot] > T(0);
  outcome.loss = static_cast<double>(grads[p + kLossSlot]);
  outcome.finite = reduced_values_finite(sums_finite);
  return outcome;
}

template <typename T>
bool DataParallelStep<T>::reduced_values_finite(std::optional<bool> sums_finite) const {
  // Note [non-finite steps are decided together]: a NaN or Inf in any rank's loss or
  // gradient makes the reduced sum non-finite in the same slot on every rank (NaN + x is NaN,
  // Inf - Inf is NaN), and every rank holds the same reduced buffer. So each rank scans its
  // own copy and all reach the same decision in the same step, with no extra message when
  // all is well. Only when a step is non-finite does StepGuard::nonfinite_step spend one small
  // collective to learn which ranks saw it first.
  // The shm path checked its sums as it computed them (Note [the finite check in the sum]);
  // across the world the parts' verdict and the loss were shared (sharding_scope.cpp).
  if (sums_finite) return *sums_finite;
  return all_finite(this->model_.gradients(), this->model_.parameter_count() + 1);  // with the loss slot
}

template class DataParallelStep<float>;
template class DataParallelStep<double>;

}  // namespace mpiddp::train
