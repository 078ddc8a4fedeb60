#pragma once
// What watches the training steps without taking part in them: the step trace (trace.path:
// which steps are traced, and their spans), the phase clock whose laps the step's parts take
// for the profile and the trace, and the profile's CPU times. The loop tells it where a step
// begins, where the update begins and ends, and where the step ends; the step strategy and
// the batch pipeline lap its clock themselves (phases()). Nothing here changes a step's bits.
#include <chrono>
#include <cstdint>

#include "mpiddp/record/step_profile.hpp"
#include "mpiddp/record/step_trace.hpp"

namespace mpiddp::record {

class StepObserver {
 public:
  using Clock = std::chrono::steady_clock;

  // profile: filled with the steps' timings when set (the trainer's options); trace: trace.*.
  StepObserver(const config::TraceConfig& trace, StepProfile* profile) : trace_(trace), profile_(profile) {}

  StepTrace& trace() { return trace_; }
  // The trace while a traced step and what follows it (its evaluation, its checkpoints) run,
  // else null: the one test of whether a span is taken.
  StepTrace* traced() const { return traced_; }
  PhaseClock& phases() { return phases_; }

  // Step `step` begins now: whether it is traced, its laps, its CPU time. Returns the trace
  // when it is traced, else null, for the reducer's bucket spans.
  StepTrace* begin_step(int64_t step);
  // Around the update: the lap before it (the verdict, in the trace only) and the optimizer's.
  void begin_update();
  void end_update();
  // The step ends at the end of its last lap: its span, its CPU time. Returns its seconds,
  // the step record's time_s (the same two readings as the trace's span).
  double end_step();
  // No more laps (after the run: a later compute_gradients, in tests, times nothing).
  void stop() { phases_.stop(); }
  // After the last step: no step is traced any more.
  void end_trace() { traced_ = nullptr; }

 private:
  StepTrace trace_;
  StepTrace* traced_ = nullptr;
  PhaseClock phases_;
  StepProfile* profile_;
  Clock::time_point step_start_{};
  double cpu_start_ = 0.0, optimizer_cpu_start_ = 0.0;
};

}  // namespace mpiddp::record
