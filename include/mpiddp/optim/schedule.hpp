#pragma once
// Learning-rate schedules as closed forms of the progress, so a resumed run needs no
// scheduler state: only the step and epoch counters.
#include <cstdint>
#include <string>

namespace mpiddp::optim {

struct ScheduleConfig {
  std::string type = "constant";  // constant | step | cosine
  std::string unit = "epoch";     // what step_size and t_max count: "epoch" or "step"
  int64_t step_size = 1;          // step: multiply by gamma every step_size units
  double gamma = 0.1;             // step
  int64_t t_max = 0;              // cosine: period in units; 0 means the whole run
  double eta_min = 0.0;           // cosine: the floor
  int64_t warmup_steps = 0;       // linear warm-up over the first optimizer steps
};

// The learning rate of optimizer step `step` (1-based) taken in epoch `epoch` (1-based).
//   step:   base * gamma^floor(u / step_size)
//   cosine: eta_min + (base - eta_min) * (1 + cos(pi * u / t_max)) / 2
// where u counts completed units (epochs: epoch - 1; steps: step - 1), as PyTorch's
// StepLR / CosineAnnealingLR stepped once per unit. Warm-up then multiplies by
// min(1, step / warmup_steps).
double scheduled_lr(const ScheduleConfig& config, double base_lr, int64_t step, int64_t epoch,
                    int64_t total_steps, int64_t total_epochs);

}  // namespace mpiddp::optim
