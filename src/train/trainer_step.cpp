// One training step, the same in every mode: the step strategy's parts in order (this
// rank's gradients, their reduction, the verdict), then the optimizer's update and the step
// record. The faults that tests inject go between them (fault_injection.hpp).
#include <chrono>

#include "mpiddp/optim/schedule.hpp"
#include "mpiddp/train/fault_injection.hpp"
#include "mpiddp/record/step_profile.hpp"
#include "mpiddp/train/trainer.hpp"

namespace mpiddp::train {

template <typename T>
typename Trainer<T>::StepDone Trainer<T>::train_step(int64_t epoch, int64_t step, const Index* samples,
                                                     Index count, int64_t total_steps) {
  // The one test that decides whether this step is traced (step_trace.hpp).
  traced_ = trace_.selects(step) ? &trace_ : nullptr;
  reducer_.set_listener(traced_);
  trace_.begin_step(step);
  const auto step_start = std::chrono::steady_clock::now();
  phases_.start(options_.profile, traced_, step_start);
  comm_.publish_step(step);
  set_pass(epoch - 1, step);
  const double cpu_start = options_.profile ? record::process_cpu_seconds() : 0.0;
  const double local_loss = step_->compute_gradients(samples, count);
  inject_step_fault(config_.faults.inject, comm_.rank(), step, model_->gradients());
  inject_collective_fault(config_.faults.inject, comm_, step);
  const StepOutcome outcome = step_->reduce(local_loss);
  stop_requested_ = outcome.stop_requested;
  if (!outcome.finite) {
    handle_nonfinite_step(step, epoch, outcome);  // throws unless the step is skipped: no update
    return {outcome.loss, false};
  }
  skipped_in_a_row_ = 0;
  const double lr = optim::scheduled_lr(config_.schedule, config_.optimizer.lr, step, epoch,
                                        total_steps, config_.epochs);
  phases_.lap(record::SpanKind::kCheck);  // not in the profile, which times the optimizer alone
  const double optimizer_cpu_start = options_.profile ? record::thread_cpu_seconds() : 0.0;
  const double grad_norm = optimizer_->step(model_->parameters(), model_->gradients(), lr);  // collective when sharded
  phases_.lap(&record::StepProfile::optimizer_s, record::SpanKind::kOptimizer);
  if (options_.profile) options_.profile->optimizer_cpu_s += record::thread_cpu_seconds() - optimizer_cpu_start;
  // The step record's time_s and the trace's step span are the same two readings.
  const auto step_end = phases_.last_or_now();
  if (traced_) traced_->add(record::SpanKind::kStep, step_start, step_end);
  if (options_.profile) {
    options_.profile->cpu_s += record::process_cpu_seconds() - cpu_start;
    ++options_.profile->steps;
  }
  inject_update_fault(config_.faults.inject, comm_.rank(), step, model_->parameters());
  if (comm_.rank() == 0 && step % config_.log_every_steps == 0) {
    io::Json record = {{"kind", "step"}, {"epoch", epoch}, {"step", step}, {"loss", outcome.loss}, {"lr", lr},
                       {"time_s", std::chrono::duration<double>(step_end - step_start).count()}};
    if (config_.optimizer.clip_grad_norm > 0.0) record["grad_norm"] = grad_norm;  // before clipping
    log_->write(record);
  }
  return {outcome.loss, true};
}

template typename Trainer<float>::StepDone Trainer<float>::train_step(int64_t, int64_t, const Index*,
                                                                      Index, int64_t);
template typename Trainer<double>::StepDone Trainer<double>::train_step(int64_t, int64_t, const Index*,
                                                                        Index, int64_t);

}  // namespace mpiddp::train
