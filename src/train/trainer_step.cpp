// One training step's pieces: gather a batch, forward and backward (compute_gradients),
// the gradient averaging over ranks (synchronize, or unsynchronized_loss with sync off)
// and the test whether the step may update the parameters (step_is_finite). run() in
// trainer.cpp calls them in that order, then the optimizer.
#include "mpiddp/train/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "mpiddp/core/finite.hpp"
#include "mpiddp/train/step_profile.hpp"

namespace mpiddp::train {

template <typename T>
void Trainer<T>::gather(const data::Dataset<T>& set, const Index* samples, Index count) {
  const auto x_bytes = static_cast<size_t>(set.features) * sizeof(T);
  for (Index j = 0; j < count; ++j) {
    const Index i = samples[j];
    std::memcpy(batch_x_.data() + j * set.features, set.x + i * set.features, x_bytes);
    if (set.is_classification()) {
      batch_labels_[j] = set.labels[i];
    } else {
      std::memcpy(batch_y_.data() + j * set.outputs, set.y + i * set.outputs,
                  static_cast<size_t>(set.outputs) * sizeof(T));
    }
  }
}

template <typename T>
double Trainer<T>::compute_gradients(const Index* samples, Index count, bool start_sync) {
  if (deterministic_) return compute_chunk_gradients(samples, count);
  if (broadcast_buffers_each_step_) broadcast_buffers();
  // The first micro-batch's backward writes the gradients (Note [gradients written, not
  // cleared] in src/nn/sequential.cpp): only what it adds to is cleared. That counts as
  // forward work in the profile; the trace shows it apart.
  model_->prepare_gradient_overwrite();
  phases_.lap(&StepProfile::forward_s, SpanKind::kZeroGradients);
  // Micro-batch m has count/K samples (the first count % K one more). Each one's loss is
  // its own mean; weighting its output gradient by size/count makes the K gradients add up
  // to the gradient of the mean over all count samples, as one batch would give.
  const Index micro_batches = std::min<Index>(config_.accumulate_steps, count);
  const Index base = count / micro_batches, extra = count % micro_batches;
  const nn::BatchTargets<T> targets{batch_y_.data(), batch_labels_.data()};
  double loss = 0.0;
  Index first = 0;
  for (Index m = 0; m < micro_batches; ++m) {
    const Index size = base + (m < extra ? 1 : 0);
    gather(train_, samples + first, size);
    phases_.lap(&StepProfile::data_s, SpanKind::kData);
    ConstMatrixView<T> x(batch_x_.data(), train_.features, size);
    // The micro-batches of all ranks with the same m form the one-process run's m-th
    // micro-batch, so BatchNorm's statistics and dropout's positions are that batch's.
    nn::PassContext pass = training_pass_;
    pass.positions = positions_.data() + first;
    pass.overwrite_gradients = m == 0;
    const auto out = model_->forward(pass, x);
    const double micro_loss = loss_->forward_backward(out, targets, model_->output_gradient());
    if (micro_batches == 1) {
      loss = micro_loss;
    } else {
      const double weight = static_cast<double>(size) / static_cast<double>(count);
      model_->output_gradient() *= static_cast<T>(weight);
      loss += micro_loss * weight;
    }
    phases_.lap(&StepProfile::forward_s, SpanKind::kForward);
    const bool last = m + 1 == micro_batches;
    if (last && start_sync) {
      // Note [the loss rides with the gradients]: the loss slot is final before backward,
      // and so is the stop vote (a signal during backward is seen by the next step).
      T* tail = model_->gradients() + model_->parameter_count();
      tail[kLossSlot] = static_cast<T>(loss);
      tail[kStopSlot] = stop_vote();
      reducer_.begin(model_->gradients(), static_cast<size_t>(model_->gradient_count()));
      sync_started_ = true;
      model_->backward(pass, x, &ready_forwarder_);
    } else {
      model_->backward(pass, x);
    }
    phases_.lap(&StepProfile::backward_s, SpanKind::kBackward);
    first += size;
  }
  return loss;
}

template <typename T>
double Trainer<T>::synchronize(double local_loss) {
  // Note [the loss rides with the gradients]: the step's reported loss is the mean over the
  // whole global batch, not rank 0's shard. Every rank's shard has the same size, so that
  // is the mean of the per-rank losses: exactly what the reducer computes for a gradient.
  // Putting the loss in one slot after the gradients gets it for free in the same
  // allreduce, without a second round trip. A NaN or Inf on any rank also lands there.
  sums_finite_.reset();  // the deterministic sums tell nothing: step_is_finite scans
  if (deterministic_) return synchronize_chunks();
  const Index p = model_->parameter_count();
  T* grads = model_->gradients();
  if (sync_started_) {
    // The overlapped reduction has been sending buckets since backward began, so this
    // rank's own gradients can no longer be inspected: only its loss names it if a step
    // turns out non-finite (handle_nonfinite_step says so).
    locally_finite_ = std::isfinite(local_loss);
    gradients_inspected_ = false;
    reducer_.finish();
    sync_started_ = false;
  } else {
    grads[p + kLossSlot] = static_cast<T>(local_loss);
    locally_finite_ = all_finite(grads, p + 1);  // the reduction overwrites them: look first
    gradients_inspected_ = true;
    grads[p + kStopSlot] = stop_vote();
    reducer_.reduce(grads, static_cast<size_t>(model_->gradient_count()));
  }
  if (reducer_.scatters())
    share_scattered_verdict();
  else
    sums_finite_ = reducer_.agreed_finite();
  phases_.lap(&StepProfile::sync_exposed_s, SpanKind::kReductionWait);
  // The mean of 0/1 votes is positive exactly when some rank voted (1/N never underflows).
  stop_requested_ = grads[p + kStopSlot] > T(0);
  return static_cast<double>(grads[p + kLossSlot]);
}

template <typename T>
double Trainer<T>::unsynchronized_loss(double local_loss) {
  // sync off: only the loss is reduced, to report the global mean. A rank whose gradients
  // are not finite sends NaN, so the decision below is still the same on every rank.
  locally_finite_ = std::isfinite(local_loss) &&
                    all_finite(model_->gradients(), model_->parameter_count());
  // The stop vote rides with the loss (Note [stopping on a signal]).
  double sums[2] = {locally_finite_ ? local_loss : std::numeric_limits<double>::quiet_NaN(),
                    static_cast<double>(stop_vote())};
  comm_.allreduce_sum(sums, 2);
  phases_.lap(SpanKind::kReductionWait);  // the trace's wait; the profile's sync stays 0
  stop_requested_ = sums[1] > 0.0;
  return sums[0] / comm_.size();
}

// Note [the step's verdict from scattered gradients]: with the optimizer sharded across the
// world each rank holds the summed gradients of its own part only (Note [the scattered
// sum] in src/distributed/mpi_scattered_sum.cpp), and the loss and stop slots, which end the
// buffer, only the owner of the last part. One allreduce of three numbers brings every rank the loss, the
// stop vote and whether any part is non-finite, so that every rank decides alike. Adding
// zeros to the one rank's loss leaves its bits as they are.
template <typename T>
void Trainer<T>::share_scattered_verdict() {
  const Index p = model_->parameter_count();
  T* grads = model_->gradients();
  const bool holds_slots = optimizer_->holds_last_part();
  const Index begin = optimizer_->begin(), end = optimizer_->end();
  double verdict[3] = {holds_slots ? static_cast<double>(grads[p + kLossSlot]) : 0.0,
                       holds_slots ? static_cast<double>(grads[p + kStopSlot]) : 0.0,
                       all_finite(grads + begin, end - begin) ? 0.0 : 1.0};
  comm_.allreduce_sum(verdict, 3);
  grads[p + kLossSlot] = static_cast<T>(verdict[0]);
  grads[p + kStopSlot] = static_cast<T>(verdict[1]);
  scattered_parts_finite_ = verdict[2] == 0.0;
}

template <typename T>
bool Trainer<T>::step_is_finite(double loss) const {
  // Note [non-finite steps are decided together]: a NaN or Inf in any rank's loss or
  // gradient makes the reduced sum non-finite in the same slot on every rank (NaN + x is NaN,
  // Inf - Inf is NaN), and every rank holds the same reduced buffer. So each rank scans its
  // own copy and all reach the same decision in the same step, with no extra message when
  // all is well. Only when a step is non-finite does handle_nonfinite_step spend one small
  // collective to learn which ranks saw it first.
  if (!config_.sync) return std::isfinite(loss);
  if (reducer_.scatters()) return scattered_parts_finite_ && std::isfinite(loss);
  // The shm path checked its sums as it computed them (Note [the finite check in the sum]).
  if (sums_finite_) return *sums_finite_;
  return all_finite(model_->gradients(), model_->parameter_count() + 1);  // with the loss slot
}

#define MPIDDP_INSTANTIATE(T)                                                      \
  template void Trainer<T>::gather(const data::Dataset<T>&, const Index*, Index);  \
  template double Trainer<T>::compute_gradients(const Index*, Index, bool);        \
  template double Trainer<T>::synchronize(double);                                 \
  template double Trainer<T>::unsynchronized_loss(double);                         \
  template bool Trainer<T>::step_is_finite(double) const;
MPIDDP_INSTANTIATE(float)
MPIDDP_INSTANTIATE(double)
#undef MPIDDP_INSTANTIATE

}  // namespace mpiddp::train
