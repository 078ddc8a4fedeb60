#pragma once
// Where a training step's time goes, for `mpiddp bench` and the step trace (`--trace`). The
// trainer keeps a profile only when handed one (TrainOptions::profile), and a trace only in
// the steps trace.steps selects; otherwise every lap is a single test.
#include <time.h>

#include <chrono>
#include <cstdint>

#include "mpiddp/record/step_trace.hpp"

namespace mpiddp::record {

// Seconds summed over the steps of the timed epochs (all but the first, warm-up, epoch).
struct StepProfile {
  double data_s = 0;          // gathering the batch, or waiting for the prefetched one (prefetch)
  double forward_s = 0;       // zeroing gradients, forward pass and loss
  double backward_s = 0;      // backward pass (including bucket starts during it)
  double sync_exposed_s = 0;  // waiting for the gradient sync after backward ends
  double optimizer_s = 0;     // the optimizer step
  double cpu_s = 0;           // CPU time of this process (all its threads) in the steps
  // CPU time of the thread that runs the optimizer step (with reduce.shard_optimizer, the
  // exchange of the parts too): unlike optimizer_s, it does not grow while a busy machine
  // keeps the thread waiting for a core.
  double optimizer_cpu_s = 0;
  int64_t steps = 0;

  void reset() { *this = StepProfile{}; }
};

// CPU seconds this process has used, all threads. Unlike wall time it does not grow while
// the process waits for a core, so it stays comparable on a machine shared with others.
inline double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// CPU seconds the calling thread has used.
inline double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Wall-clock seconds since `start`: the run's and each epoch's time (run, finish_epoch).
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The laps of one step: each adds the time since the previous lap to one field of a profile
// and, in a traced step, a span of that kind to the trace, so one clock reading serves
// both. The laps run on from the step's start to the optimizer's end without a gap, so the
// phases add up to the step's time. Does nothing without a profile or a trace.
class PhaseClock {
 public:
  using Clock = std::chrono::steady_clock;
  PhaseClock() = default;  // off until start()

  // Begins a step's laps at `start`, a reading the caller takes anyway (the step's time).
  void start(StepProfile* profile, StepTrace* trace, Clock::time_point start) {
    profile_ = profile;
    trace_ = trace;
    on_ = profile || trace;
    last_ = start;
  }
  void stop() { start(nullptr, nullptr, {}); }

  void lap(double StepProfile::*field, SpanKind kind) {
    if (!on_) return;
    const auto now = Clock::now();
    if (profile_) profile_->*field += std::chrono::duration<double>(now - last_).count();
    if (trace_) trace_->add(kind, last_, now);
    last_ = now;
  }
  // A lap only the trace shows: work the profile has no field for.
  void lap(SpanKind kind) {
    if (!on_) return;
    const auto now = Clock::now();
    if (trace_) trace_->add(kind, last_, now);
    last_ = now;
  }
  // The step's trace while it is traced, else null: for spans off the laps' track.
  StepTrace* trace() const { return trace_; }
  // The end of the last lap; without laps, now.
  Clock::time_point last_or_now() const { return on_ ? last_ : Clock::now(); }

 private:
  StepProfile* profile_ = nullptr;
  StepTrace* trace_ = nullptr;
  bool on_ = false;
  Clock::time_point last_{};
};

}  // namespace mpiddp::record
