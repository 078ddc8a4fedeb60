// The observer of the training steps (include/mpiddp/record/step_observer.hpp).
#include "mpiddp/record/step_observer.hpp"

namespace mpiddp::record {

StepTrace* StepObserver::begin_step(int64_t step) {
  traced_ = trace_.selects(step) ? &trace_ : nullptr;
  trace_.begin_step(step);
  step_start_ = Clock::now();
  phases_.start(profile_, traced_, step_start_);
  if (profile_) cpu_start_ = process_cpu_seconds();
  return traced_;
}

void StepObserver::begin_update() {
  phases_.lap(SpanKind::kCheck);  // not in the profile, which times the optimizer alone
  if (profile_) optimizer_cpu_start_ = thread_cpu_seconds();
}

void StepObserver::end_update() {
  phases_.lap(&StepProfile::optimizer_s, SpanKind::kOptimizer);
  if (profile_) profile_->optimizer_cpu_s += thread_cpu_seconds() - optimizer_cpu_start_;
}

double StepObserver::end_step() {
  const Clock::time_point step_end = phases_.last_or_now();
  if (traced_) traced_->add(SpanKind::kStep, step_start_, step_end);
  if (profile_) {
    profile_->cpu_s += process_cpu_seconds() - cpu_start_;
    ++profile_->steps;
  }
  return std::chrono::duration<double>(step_end - step_start_).count();
}

}  // namespace mpiddp::record
