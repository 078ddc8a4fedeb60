// One training step, the same in every mode: this rank's gradients, their reduction and the
// verdict, the update, the step record. What differs between modes is the step strategy's
// (step_strategy.hpp); the profile and the trace watch from the observer
// (record/step_observer.hpp); injected faults wrap the strategy (fault_injecting_step.hpp).
#include "mpiddp/optim/schedule.hpp"
#include "mpiddp/train/trainer.hpp"

namespace mpiddp::train {

template <typename T>
typename Trainer<T>::StepDone Trainer<T>::train_step(int64_t epoch, int64_t step, const Index* samples,
                                                     Index count, int64_t total_steps) {
  replica_.reducer.set_listener(observer_.begin_step(step));
  comm_.publish_step(step);
  set_pass(epoch - 1, step);
  const double local_loss = step_->compute_gradients(samples, count);
  const StepOutcome outcome = step_->reduce(local_loss);
  stop_requested_ = outcome.stop_requested;
  if (!outcome.finite) {
    guard_->nonfinite_step(step, epoch, outcome);  // throws unless the step is skipped: no update
    return {outcome.loss, false};
  }
  guard_->step_applied();
  const double lr = optim::scheduled_lr(config_.schedule, config_.optimizer.lr, step, epoch, total_steps, config_.epochs);
  observer_.begin_update();
  const double grad_norm = step_->update(lr);
  observer_.end_update();
  const double seconds = observer_.end_step();
  record_->step(epoch, step, outcome.loss, lr, seconds, grad_norm);
  return {outcome.loss, true};
}

template typename Trainer<float>::StepDone Trainer<float>::train_step(int64_t, int64_t, const Index*,
                                                                      Index, int64_t);
template typename Trainer<double>::StepDone Trainer<double>::train_step(int64_t, int64_t, const Index*,
                                                                        Index, int64_t);

}  // namespace mpiddp::train
