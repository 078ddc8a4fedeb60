#pragma once
// Where a training step's time goes, for `mpiddp bench`. The trainer keeps a profile only
// when handed one (TrainOptions::profile); otherwise every lap is a single null test.
#include <time.h>

#include <chrono>
#include <cstdint>

namespace mpiddp::train {

// Seconds summed over the steps of the timed epochs (all but the first, warm-up, epoch).
struct StepProfile {
  double data_s = 0;          // gathering the batch from the dataset
  double forward_s = 0;       // zeroing gradients, forward pass and loss
  double backward_s = 0;      // backward pass (including bucket starts during it)
  double sync_exposed_s = 0;  // waiting for the gradient sync after backward ends
  double optimizer_s = 0;     // the optimizer step
  double cpu_s = 0;           // CPU time of this process (all its threads) in the steps
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

// Wall-clock seconds since `start`: the run's and each epoch's time (run, finish_epoch).
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Adds the time since the previous lap to one field of a profile; does nothing without one.
class PhaseClock {
 public:
  using Clock = std::chrono::steady_clock;
  explicit PhaseClock(StepProfile* profile) : profile_(profile) {
    if (profile_) last_ = Clock::now();
  }
  void lap(double StepProfile::*field) {
    if (!profile_) return;
    const auto now = Clock::now();
    profile_->*field += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }

 private:
  StepProfile* profile_;
  Clock::time_point last_;
};

}  // namespace mpiddp::train
