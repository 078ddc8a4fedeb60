#include "mpiddp/optim/schedule.hpp"

#include <algorithm>
#include <cmath>

namespace mpiddp::optim {

double scheduled_lr(const ScheduleConfig& config, double base_lr, int64_t step, int64_t epoch,
                    int64_t total_steps, int64_t total_epochs) {
  const bool per_step = config.unit == "step";
  const int64_t completed = per_step ? step - 1 : epoch - 1;
  double lr = base_lr;
  if (config.type == "step") {
    lr = base_lr * std::pow(config.gamma, static_cast<double>(completed / config.step_size));
  } else if (config.type == "cosine") {
    const int64_t period = config.t_max > 0 ? config.t_max : (per_step ? total_steps : total_epochs);
    const double phase = M_PI * static_cast<double>(completed) / static_cast<double>(period);
    lr = config.eta_min + (base_lr - config.eta_min) * (1.0 + std::cos(phase)) / 2.0;
  }
  if (config.warmup_steps > 0)
    lr *= std::min(1.0, static_cast<double>(step) / static_cast<double>(config.warmup_steps));
  return lr;
}

}  // namespace mpiddp::optim
