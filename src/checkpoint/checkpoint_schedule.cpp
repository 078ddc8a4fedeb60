// When a checkpoint is due (include/mpiddp/checkpoint/checkpoint.hpp).
#include "mpiddp/checkpoint/checkpoint.hpp"

namespace mpiddp::checkpoint {

bool checkpoint_due_mid_epoch(const config::CheckpointConfig& settings, int64_t step) {
  return !settings.dir.empty() && settings.every_steps > 0 && step % settings.every_steps == 0;
}

bool checkpoint_due_after_epoch(const config::CheckpointConfig& settings, int64_t epoch, int64_t step,
                                bool last_epoch) {
  if (settings.dir.empty()) return false;
  return last_epoch || (settings.every_epochs > 0 && epoch % settings.every_epochs == 0) ||
         checkpoint_due_mid_epoch(settings, step);
}

}  // namespace mpiddp::checkpoint
